// Drafting with a separate draft model (SpeculativeParams::draft_model): the
// draft's own KV (in its context, at the pages of the target's page tables)
// catches up on the tokens it has not seen, then γ single-row passes draw the
// drafts with each sequence's rule: on the device as the sparse drafts' chain
// (begin_chained) where the draft's context chains passes (its window too),
// else on the host (draft_pass_by_pass), both run on the draft model's context.
// Verification and acceptance are the chain's.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "speculative/round_state.h"
#include "speculative/speculative_decoder.h"

namespace vegas {

void SpeculativeDecoder::advance_draft(const std::vector<DraftAdvance> &items) {
  // Prefill chunks, no logits. One forward pass takes every sequence's next
  // chunk (after a round that accepted every draft, each lacks one token),
  // up to the draft context's rows.
  std::vector<std::pair<SeqState *, int32_t>> advanced;
  for (;;) {
    ForwardBatch batch;
    advanced.clear();
    int32_t rows = 0;
    for (const DraftAdvance &item : items) {
      const int32_t len = item.st->draft_len, n = std::min(draft_max_rows_ - rows, item.end - len);
      if (n <= 0) continue;
      SeqRows r;
      r.n_tokens = n;
      r.tokens = item.seq->tokens.data() + len;
      r.start_pos = len;
      r.page_table = item.seq->page_table.data();
      r.n_pages = static_cast<int32_t>(item.seq->page_table.size());
      r.logits = SeqRows::Logits::kNone;
      batch.seqs.push_back(r);
      advanced.emplace_back(item.st, n);
      rows += n;
    }
    if (batch.seqs.empty()) return;
    draft_context_->forward(batch);
    for (const auto &[st, n] : advanced) st->draft_len += n;
  }
}

void SpeculativeDecoder::catch_up_drafts(std::vector<RoundWork> &work) {
  // Positions [draft_len, kv_len): the newest token (at kv_len) is the first
  // draft pass's row.
  std::vector<DraftAdvance> items;
  for (RoundWork &w : work)
    if (w.gamma > 0) items.push_back({w.seq, w.st, w.seq->kv_len});
  advance_draft(items);
}

void SpeculativeDecoder::follow_prefill(const std::vector<const Sequence *> &seqs,
                                        const std::vector<SeqRows> &prompt_rows) {
  if (draft_context_ == nullptr) return;
  std::vector<DraftAdvance> items;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SeqRows &r = prompt_rows[i];
    // Not state(): its tuning starts with the prompt's last chunk.
    SeqState &st = states_[seqs[i]->id];
    // A cached prefix the draft never ran is run here too.
    items.push_back({seqs[i], &st, r.start_pos + r.n_tokens});
  }
  advance_draft(items);
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
  catch_up_drafts(work);
  for (RoundWork &w : work)
    if (w.gamma > 0) set_draft_window(w);
  // The sparse drafts' passes, on the draft model's context (draft_row).
  model_round_ = true;
  struct Reset {
    bool &flag;
    ~Reset() { flag = false; }
  } reset{model_round_};
  if (!draft_model_chain(work, max_gamma, rs))
    draft_pass_by_pass(work, max_gamma, *draft_context_, rs);
}

bool SpeculativeDecoder::draft_model_chain(std::vector<RoundWork> &work, int32_t max_gamma,
                                           const RoundState &rs) {
  // The chain's passes draw on the device and the host reads every draft
  // and its candidates once (a window's set is the same for every pass). The verify pass runs on
  // the model's own context, so it is not fed by this chain: it is read before verification.
  ChainedDrafts chain;
  if (!rs.by_candidates || !begin_chained(work, max_gamma, *draft_context_, &chain)) return false;
  if (finish_chained(chain, *draft_context_))
    build_chained_q(chain);
  else
    drop_chained_drafts(chain);  // the draft's KV past draft_len is caught up next round
  abandon_chain(&chain);
  return true;
}

void SpeculativeDecoder::settle_draft(RoundWork &w, int32_t n_accepted) {
  // Pass j wrote the draft's KV at kv_len + j for the round's first token and
  // drafts 1 .. γ - 1; those up to the last accepted one are the sequence's.
  if (w.gamma > 0) w.st->draft_len = w.seq->kv_len + 1 + std::min(n_accepted, w.gamma - 1);
}

}  // namespace vegas
