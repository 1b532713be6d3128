#include "speculative/model_drafter.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/error.h"
#include "session/sequence_rows.h"
#include "speculative/round_state.h"

namespace vegas {

void ModelDrafter::advance(const std::vector<std::pair<const Sequence *, int32_t>> &to_end,
                           const std::vector<ScoreCapture *> *last_rows) {
  // Prefill chunks, no logits. One forward pass takes every sequence's next
  // chunk (after a round that accepted every draft, each lacks one token),
  // up to the context's rows.
  std::vector<std::pair<SeqDraft *, int32_t>> advanced;
  std::vector<int32_t> last_row(to_end.size());  // a captured chunk's last row, in it
  for (;;) {
    ForwardBatch batch;
    advanced.clear();
    int32_t rows = 0;
    for (size_t i = 0; i < to_end.size(); ++i) {
      const auto &[seq, end] = to_end[i];
      SeqDraft &d = seqs_[seq->id];
      const int32_t n = std::min(max_rows_ - rows, end - d.len);
      if (n <= 0) continue;
      batch.seqs.push_back(
          sequence_rows(*seq, seq->tokens.data() + d.len, n, d.len, SeqRows::Logits::kNone));
      ScoreCapture *capture = last_rows != nullptr ? (*last_rows)[i] : nullptr;
      if (capture != nullptr && d.len + n == end) {  // the chunk holds the last row
        last_row[i] = n - 1;
        capture->rows = &last_row[i];
        capture->n_rows = 1;
        batch.seqs.back().capture = capture;
      }
      advanced.emplace_back(&d, n);
      rows += n;
    }
    if (batch.seqs.empty()) return;
    context_.forward(batch);
    for (const auto &[d, n] : advanced) d->len += n;
  }
}

void ModelDrafter::follow_prefill(const std::vector<const Sequence *> &seqs,
                                  const std::vector<SeqRows> &rows) {
  std::vector<std::pair<const Sequence *, int32_t>> to_end;
  for (size_t i = 0; i < seqs.size(); ++i)
    to_end.emplace_back(seqs[i], rows[i].start_pos + rows[i].n_tokens);
  advance(to_end);
}

void ModelDrafter::catch_up_scoring(const std::vector<const Sequence *> &seqs,
                                    const std::vector<ScoreCapture *> &captures) {
  std::vector<std::pair<const Sequence *, int32_t>> to_end;
  for (const Sequence *seq : seqs) to_end.emplace_back(seq, seq->kv_len);
  for (ScoreCapture *capture : captures)
    if (capture != nullptr) capture->n_rows = 0;
  advance(to_end, &captures);
  for (ScoreCapture *capture : captures)
    if (capture != nullptr) capture->rows = nullptr;  // its row's index lived in advance()
}

void ModelDrafter::begin_round(const std::vector<const Sequence *> &seqs) {
  std::vector<std::pair<const Sequence *, int32_t>> to_end;
  for (const Sequence *seq : seqs) to_end.emplace_back(seq, seq->kv_len);
  advance(to_end);
  if (window_ > 0)
    for (const Sequence *seq : seqs) set_window(*seq, seqs_[seq->id]);
}

void ModelDrafter::set_window(const Sequence &seq, SeqDraft &d) const {
  const int32_t prefix = std::max(0, seq.kv_len - window_);
  const int32_t sink = std::min(sink_, prefix);
  const int32_t stride = std::max(sink, 1);
  // One entry per layer of the draft model (not the model's).
  d.window_positions.resize(static_cast<size_t>(n_layers_) * stride);
  d.window_counts.assign(static_cast<size_t>(n_layers_), sink);
  for (int32_t l = 0; l < n_layers_; ++l)
    for (int32_t p = 0; p < sink; ++p) d.window_positions[static_cast<size_t>(l) * stride + p] = p;
  d.window = SparseAttention{prefix, d.window_positions.data(), d.window_counts.data(), stride};
}

const SparseAttention *ModelDrafter::window_of(const Sequence &seq) const {
  if (window_ <= 0) return nullptr;
  const auto it = seqs_.find(seq.id);
  if (it == seqs_.end())
    fail(VEGAS_ERR_INTERNAL,
         "draft window of sequence " + std::to_string(seq.id) + " before its round began");
  return &it->second.window;
}

void ModelDrafter::settle_sequence(const Sequence &seq, int32_t gamma, int32_t n_accepted) {
  if (gamma > 0) seqs_[seq.id].len = seq.kv_len + 1 + std::min(n_accepted, gamma - 1);
}

void ModelDrafter::draft(RoundDrafting &r) {
  std::vector<const Sequence *> drafting;
  for (const RoundWork &w : r.work)
    if (w.gamma > 0) drafting.push_back(w.seq);
  begin_round(drafting);
  ChainedDrafts chain;
  if (r.rs.by_candidates && r.passes.begin_chain(r.work, r.max_gamma, context_, &chain)) {
    if (r.passes.finish_chain(chain, context_))
      r.passes.build_chained_q(chain);
    else
      r.passes.drop_chained_drafts(chain);  // the passes' KV is caught up next round
    r.passes.abandon_chain(&chain);
    return;
  }
  r.passes.pass_by_pass(r.work, r.max_gamma, context_, r.rs);
}

void ModelDrafter::settle(const std::vector<RoundWork> &work,
                          const std::vector<int32_t> &n_accepted) {
  for (size_t i = 0; i < work.size(); ++i)
    settle_sequence(*work[i].seq, work[i].gamma, n_accepted[i]);
}

}  // namespace vegas
