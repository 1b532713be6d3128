// A separate draft model as a Drafter (SpeculativeParams::draft_model): its
// context (KV slots at the model's page ids, storage of its own) and, per
// sequence, how much of the sequence its KV holds and the sliding window its
// draft rows attend to. Its rounds run the decoder's draft passes
// (DraftPasses, the sparse drafts' machinery) on context(); this class keeps
// the draft's KV in step with the sequence around them.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "session/sequence.h"
#include "speculative/drafter.h"

namespace vegas {

class ModelDrafter final : public Drafter {
 public:
  // `max_rows`: the most rows one forward call on `context` may carry;
  // `n_layers`: the draft's (its window sets have one entry per layer);
  // `window` > 0: draft rows see the first `sink` tokens and the last `window`.
  ModelDrafter(BackendContext &context, int32_t max_rows, int32_t n_layers, int32_t window,
               int32_t sink)
      : context_(context), max_rows_(max_rows), n_layers_(n_layers), window_(window), sink_(sink) {}

  DrafterKind kind() const override { return DrafterKind::kModel; }
  BackendContext &context() { return context_; }
  int32_t n_layers() const { return n_layers_; }
  // Runs through the draft the prompt rows the model just ran (rows[i] of
  // seqs[i]), and whatever earlier positions of those sequences it lacks.
  void follow_prefill(const std::vector<const Sequence *> &seqs,
                      const std::vector<SeqRows> &rows) override;
  // The draft's KV caught up (begin_round), then γ single-row passes on the
  // draft's context (draft_row gives the draft's rows there): chained on the
  // device where that context can (its window too; the host reads every
  // draft and its candidates once), else drawn pass by pass on the host.
  // The verify pass runs on the model's own context, so no chain feeds it.
  void draft(RoundDrafting &round) override;
  // settle_sequence for each sequence of the round.
  void settle(const std::vector<RoundWork> &work, const std::vector<int32_t> &n_accepted) override;
  // P@model: begin_round's catch-up for `seqs`, where each sequence's last
  // row (its newest token in the KV, at kv_len - 1) fills captures[i] (null:
  // none; its n_candidates and buffers the caller's, its row set here). A
  // capture whose row did not run now (the draft held it already) is left
  // with n_rows 0.
  void catch_up_scoring(const std::vector<const Sequence *> &seqs,
                        const std::vector<ScoreCapture *> &captures);
  // A round of `seqs` begins: the draft runs every position before each
  // sequence's kv_len it lacks (the newest token, at kv_len, is the first
  // draft pass's row), and each one's window is set for the round.
  void begin_round(const std::vector<const Sequence *> &seqs);
  // The sparse set of `seq`'s draft rows this round (its window over the
  // draft's layers, set by begin_round), or null for full attention.
  const SparseAttention *window_of(const Sequence &seq) const;
  // After acceptance, `seq` as the round found it: pass j of the round's
  // `gamma` wrote the draft's KV at kv_len + j for the round's first token and
  // drafts 1 .. γ - 1; those up to the last accepted one are the sequence's.
  void settle_sequence(const Sequence &seq, int32_t gamma, int32_t n_accepted);
  void forget(int32_t seq_id) override { seqs_.erase(seq_id); }

 private:
  struct SeqDraft {
    int32_t len = 0;  // positions [0, len) of the draft's KV hold the sequence's tokens
    std::vector<int32_t> window_positions, window_counts;
    SparseAttention window;
  };
  // Runs each sequence's tokens [len, end) through the draft, the
  // sequences' chunks batched into as few forward passes as its rows allow.
  // `last_rows` (may be null): per to_end entry, a capture its last row
  // (end - 1) fills where this call runs that row (setting its n_rows to 1).
  void advance(const std::vector<std::pair<const Sequence *, int32_t>> &to_end,
               const std::vector<ScoreCapture *> *last_rows = nullptr);
  void set_window(const Sequence &seq, SeqDraft &d) const;

  BackendContext &context_;
  int32_t max_rows_, n_layers_, window_, sink_;
  std::map<int32_t, SeqDraft> seqs_;
};

}  // namespace vegas
