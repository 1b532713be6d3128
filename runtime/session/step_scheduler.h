// The session's scheduler (DESIGN §3): which sequences a step runs and how
// (the decode set, vanilla rows or a speculative round, prefill chunks), and
// the one place that decides KV reservations and roll-backs: it reserves the
// pages a step's rows, a round's drafts or a vanilla chain will write, ends
// nothing itself (the sequences that do not fit are handed back), and settles
// a verified round. SequenceKv stays the one writer of the KV state; the
// session's other KV calls (attach a prefix, publish, release) are not
// reservations.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "session/mode_chooser.h"
#include "session/sequence.h"
#include "session/sequence_kv.h"
#include "speculative/speculative_decoder.h"

namespace vegas {

struct SchedulingParams {
  int32_t max_batch = 64;
  int32_t prefill_chunk = 512;
  bool prefill_first = false;  // decoding waits until every prompt is in the KV cache
};

// One step's work. The decoding sequences (one pending row each) come first
// so that long prompts, prefilled in chunks, never stall them.
struct StepPlan {
  std::vector<Sequence *> decoding;                      // at most max_batch
  ModeChooser::Kind kind = ModeChooser::Kind::kVanilla;  // how `decoding` runs
  // The plain forward pass: its sequences in order and their rows (the
  // decoding ones' single row when they run vanilla, then prompt chunks).
  std::vector<Sequence *> forward;
  std::vector<int32_t> rows;
  // Whether the step decodes and holds no prompt rows.
  bool decode_only() const {
    const size_t decoding_rows = kind == ModeChooser::Kind::kVanilla ? decoding.size() : 0;
    return !decoding.empty() && forward.size() == decoding_rows;
  }
};

class StepScheduler {
 public:
  // Picks the kind of a non-empty decoding set.
  using ChooseKind = std::function<ModeChooser::Kind(const std::vector<Sequence *> &)>;

  StepScheduler(SequenceKv &kv, const SchedulingParams &params) : kv_(kv), params_(params) {}

  // The step for `sequences` (finished ones skipped). Reserves nothing.
  StepPlan plan(const std::map<int32_t, std::unique_ptr<Sequence>> &sequences,
                const ChooseKind &choose) const;
  // Pages for the plan's forward rows; a sequence that does not fit leaves
  // the plan and is returned (to end with KV_FULL, keeping its tokens).
  std::vector<Sequence *> reserve_forward(StepPlan &plan);
  // Pages for each planned round sequence's drafts, then, where the pool has
  // them, for the round's longest γ (RoundSeq::chain_room). A sequence whose
  // drafts do not fit leaves `round` and is returned.
  std::vector<Sequence *> reserve_round(std::vector<RoundSeq> &round);
  // Pages for `steps` more positions of each of `seqs` (a vanilla chain);
  // false when one does not fit (pages reserved before it stay: the plain
  // step that follows uses them).
  bool reserve_chain(const std::vector<Sequence *> &seqs, int32_t steps);
  // A forward pass wrote `rows` more positions of `seq`.
  void advance(Sequence &seq, int32_t rows) { kv_.advance(seq, rows); }
  // A round's outcome was committed and `seq` still runs: its KV keeps the
  // verified positions, the rejected drafts' pages go back.
  void settle(Sequence &seq, int32_t kv_len) { kv_.settle(seq, kv_len); }

  int32_t page_size() const { return kv_.pool().page_size(); }

 private:
  // reserve() that reports KV_FULL as false; other errors propagate.
  bool try_reserve(Sequence &seq, int64_t positions);

  SequenceKv &kv_;
  SchedulingParams params_;
};

}  // namespace vegas
