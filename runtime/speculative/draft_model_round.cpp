// Drafting with a separate draft model (SpeculativeParams::draft_model): the
// draft's own KV (in its context, at the pages of the target's page tables)
// catches up on the tokens it has not seen, then γ single-row passes draw the
// drafts on the host with each sequence's rule: the sparse drafts' passes
// (draft_pass_by_pass), run on the draft model's context.
// Verification and acceptance are the chain's.
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "speculative/round_state.h"
#include "speculative/speculative_decoder.h"

namespace vegas {

void SpeculativeDecoder::catch_up_draft(RoundWork &w) {
  const Sequence &seq = *w.seq;
  int32_t &len = w.st->draft_len;
  // Prefill chunks, no logits: positions [draft_len, kv_len), the newest
  // token (at kv_len) is the first draft pass's row.
  while (len < seq.kv_len) {
    SeqRows r;
    r.n_tokens = std::min(draft_max_rows_, seq.kv_len - len);
    r.tokens = seq.tokens.data() + len;
    r.start_pos = len;
    r.page_table = seq.page_table.data();
    r.n_pages = static_cast<int32_t>(seq.page_table.size());
    r.logits = SeqRows::Logits::kNone;
    ForwardBatch batch;
    batch.seqs.push_back(r);
    draft_context_->forward(batch);
    len += r.n_tokens;
  }
}

void SpeculativeDecoder::set_draft_window(RoundWork &w) {
  if (params_.draft_window <= 0) return;
  SeqState &st = *w.st;
  const int32_t prefix = std::max(0, w.seq->kv_len - params_.draft_window);
  const int32_t sink = std::min(params_.selection.sink, prefix);
  const int32_t stride = std::max(sink, 1);
  // One entry per layer of the draft model (not the target's).
  st.window_positions.resize(static_cast<size_t>(draft_layers_) * stride);
  st.window_counts.assign(static_cast<size_t>(draft_layers_), sink);
  for (int32_t l = 0; l < draft_layers_; ++l)
    for (int32_t p = 0; p < sink; ++p) st.window_positions[static_cast<size_t>(l) * stride + p] = p;
  st.window = SparseAttention{prefix, st.window_positions.data(), st.window_counts.data(), stride};
}

void SpeculativeDecoder::draft_by_model(std::vector<RoundWork> &work, int32_t max_gamma,
                                        RoundState &rs) {
  if (draft_context_ == nullptr || draft_max_rows_ <= 0)
    fail(VEGAS_ERR_INTERNAL, "a draft-model session without the draft model's context");
  for (RoundWork &w : work) {
    if (w.gamma == 0) continue;
    catch_up_draft(w);
    set_draft_window(w);
  }
  // The sparse drafts' passes, on the draft model's context (draft_row).
  model_round_ = true;
  struct Reset {
    bool &flag;
    ~Reset() { flag = false; }
  } reset{model_round_};
  draft_pass_by_pass(work, max_gamma, *draft_context_, rs);
}

void SpeculativeDecoder::settle_draft(RoundWork &w, int32_t n_accepted) {
  // Pass j wrote the draft's KV at kv_len + j for the round's first token and
  // drafts 1 .. γ - 1; those up to the last accepted one are the sequence's.
  if (w.gamma > 0) w.st->draft_len = w.seq->kv_len + 1 + std::min(n_accepted, w.gamma - 1);
}

}  // namespace vegas
