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
  std::vector<ScoreCapture> captures(work.size());
  std::vector<ScoreCapture *> capture_of;
  std::vector<std::vector<float>> logits(work.size()), lse(work.size());
  for (size_t i = 0; i < work.size(); ++i) {
    const Sequence &seq = *work[i].seq;
    seqs.push_back(&seq);
    // The row at kv_len - 1 sees [0, kv_len): every candidate.
    const int32_t n = seq.kv_len;
    logits[i].resize(static_cast<size_t>(draft.layers) * draft.heads * static_cast<size_t>(n));
    lse[i].resize(static_cast<size_t>(draft.layers) * draft.heads);
    captures[i].n_candidates = n;
    captures[i].logits = logits[i].data();
    captures[i].lse = lse[i].data();
    capture_of.push_back(n > 0 ? &captures[i] : nullptr);
  }
  const std::vector<char> ran = model_drafter_->catch_up_scoring(seqs, capture_of);
  for (size_t i = 0; i < work.size(); ++i) {
    if (!ran[i]) continue;  // the draft held its newest row already: the last sets stay
    RoundWork &w = work[i];
    const int32_t n = w.seq->kv_len;
    setup_capture(*w.st, n, {0});
    ScoreShape from = draft;
    from.n = n;
    map_draft_scores(logits[i].data(), lse[i].data(), from, w.st->score_logits.data(),
                     w.st->score_lse.data(), ScoreShape{config_.n_layers, 1, config_.n_heads, n});
    select(*w.seq, *w.st, n, 0);
    ++totals_.selections;
  }
  totals_.select_seconds += seconds_now() - t0;
}

}  // namespace vegas
