// Drafting with a separate draft model (SpeculativeParams::draft_model): the
// draft's own KV (in its context, at the pages of the target's page tables)
// catches up on the tokens it has not seen, then γ single-row passes draw the
// drafts on the host with each sequence's rule, as the sparse passes do.
// Verification and acceptance are the chain's.
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/parallel_rows.h"
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

const SparseAttention *SpeculativeDecoder::draft_window(RoundWork &w) {
  if (params_.draft_window <= 0) return nullptr;
  SeqState &st = *w.st;
  const int32_t prefix = std::max(0, w.seq->kv_len - params_.draft_window);
  const int32_t sink = std::min(params_.selection.sink, prefix);
  const int32_t stride = std::max(sink, 1);
  st.window_positions.resize(static_cast<size_t>(config_.n_layers) * stride);
  st.window_counts.assign(static_cast<size_t>(config_.n_layers), sink);
  for (int32_t l = 0; l < config_.n_layers; ++l)
    for (int32_t p = 0; p < sink; ++p) st.window_positions[static_cast<size_t>(l) * stride + p] = p;
  st.window = SparseAttention{prefix, st.window_positions.data(), st.window_counts.data(), stride};
  return &st.window;
}

void SpeculativeDecoder::draft_by_model(std::vector<RoundWork> &work, int32_t max_gamma,
                                        RoundState &rs) {
  (void)rs;
  if (draft_context_ == nullptr || draft_max_rows_ <= 0)
    fail(VEGAS_ERR_INTERNAL, "a draft-model session without the draft model's context");
  const int32_t vocab = config_.vocab_size;
  std::vector<const SparseAttention *> windows(work.size(), nullptr);
  for (size_t i = 0; i < work.size(); ++i) {
    if (work[i].gamma == 0) continue;
    catch_up_draft(work[i]);
    windows[i] = draft_window(work[i]);
  }
  std::vector<int32_t> inputs(work.size());
  for (int32_t j = 0; j < max_gamma; ++j) {
    ForwardBatch batch;
    std::vector<RoundWork *> in_batch;
    for (size_t i = 0; i < work.size(); ++i) {
      RoundWork &w = work[i];
      if (j >= w.gamma) continue;
      inputs[i] = j == 0 ? w.seq->tokens.back() : w.drafts[static_cast<size_t>(j - 1)];
      SeqRows r;
      r.tokens = &inputs[i];
      r.n_tokens = 1;
      r.start_pos = w.seq->kv_len + j;
      r.page_table = w.seq->page_table.data();
      r.n_pages = static_cast<int32_t>(w.seq->page_table.size());
      r.logits = SeqRows::Logits::kLast;
      r.sparse = windows[i];
      batch.seqs.push_back(r);
      in_batch.push_back(&w);
    }
    const float *logits = draft_context_->forward(batch);
    parallel_rows(
        static_cast<int64_t>(in_batch.size()),
        [&](int64_t b) {
          RoundWork &w = *in_batch[static_cast<size_t>(b)];
          const SamplingParams &rule = w.seq->req.sampling;
          TokenDistribution &q = w.q[static_cast<size_t>(j)];
          std::vector<int32_t> history;
          if (rule.has_penalties()) {
            history.assign(w.seq->tokens.begin(), w.seq->tokens.end());
            history.insert(history.end(), w.drafts.begin(), w.drafts.begin() + j);
          }
          build_distribution(logits + b * vocab, vocab, rule, history, &q);
          w.drafts[static_cast<size_t>(j)] =
              rule.greedy() ? q.ids[0] : sample_from(q, w.rng.uniform());
        },
        in_batch.size() >= threaded_round_seqs());
  }
}

void SpeculativeDecoder::settle_draft(RoundWork &w, int32_t n_accepted) {
  // Pass j wrote the draft's KV at kv_len + j for the round's first token and
  // drafts 1 .. γ - 1; those up to the last accepted one are the sequence's.
  if (w.gamma > 0) w.st->draft_len = w.seq->kv_len + 1 + std::min(n_accepted, w.gamma - 1);
}

}  // namespace vegas
