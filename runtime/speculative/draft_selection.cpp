// P@model (SpecAttn, issue 24): the sparse passes' sets picked by a draft
// model's attention. At a round's start the draft's KV catches up on what
// the last round committed, the scores of its newest row (the last token in
// the KV, whose query is the closest to the round's first draft's) are
// captured, read as the model's (draft_scores.h) and the policy selects
// from them. The verify pass then captures nothing.
#include <chrono>
#include <vector>

#include "common/error.h"
#include "speculative/draft_scores.h"
#include "speculative/round_state.h"
#include "speculative/speculative_decoder.h"

namespace vegas {

namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void SpeculativeDecoder::select_from_draft(std::vector<RoundWork> &work) {
  if (model_drafter_ == nullptr)
    fail(VEGAS_ERR_INTERNAL, "policy '" + params_.policy + "' without the draft model's context");
  const double t0 = seconds_now();
  const ScoreShape draft{model_drafter_->n_layers(), 1, draft_heads_, 0};
  std::vector<const Sequence *> seqs;
  std::vector<ScoreCapture *> capture_of;
  for (RoundWork &w : work) {
    seqs.push_back(w.seq);
    // The row at kv_len - 1 sees [0, kv_len): every candidate.
    const int32_t n = w.seq->kv_len;
    SpeculativeSeqState &st = *w.st;
    st.draft_logits.resize(static_cast<size_t>(draft.layers) * draft.heads *
                           static_cast<size_t>(n));
    st.draft_lse.resize(static_cast<size_t>(draft.layers) * draft.heads);
    st.draft_capture.n_candidates = n;
    st.draft_capture.logits = st.draft_logits.data();
    st.draft_capture.lse = st.draft_lse.data();
    capture_of.push_back(n > 0 ? &st.draft_capture : nullptr);
  }
  model_drafter_->catch_up_scoring(seqs, capture_of);
  for (RoundWork &w : work) {
    SpeculativeSeqState &st = *w.st;
    // The draft held its newest row already: the last sets stay.
    if (w.seq->kv_len == 0 || st.draft_capture.n_rows == 0) continue;
    const int32_t n = w.seq->kv_len;
    setup_capture(st, n, {0});
    ScoreShape from = draft;
    from.n = n;
    map_draft_scores(st.draft_logits.data(), st.draft_lse.data(), from, st.score_logits.data(),
                     st.score_lse.data(), ScoreShape{config_.n_layers, 1, config_.n_heads, n});
    select(*w.seq, st, n, 0);
    ++totals_.selections;
  }
  totals_.select_seconds += seconds_now() - t0;
}

}  // namespace vegas
