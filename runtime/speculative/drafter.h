// Who drafts a speculative round (issue P2, "a drafter interface"): the
// policy's sparse passes over the model's own KV (SparseDrafter), prompt
// lookup in the sequence's own context (LookupDrafter) or a separate draft
// model (ModelDrafter). Each implements Drafter, and the decoder runs every
// round the same way around it: plan, draft, verify, accept, select. A
// hybrid policy (P+lookup, P+model) holds two, between which the session's
// ModeChooser picks round by round. The drafters that run forward passes
// (sparse, model) share the decoder's pass machinery (DraftPasses): γ one-row
// passes, chained on the device where the backend can, else drawn pass by
// pass on the host.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "session/sequence.h"
#include "speculative/round_work.h"

namespace vegas {

enum class DrafterKind { kSparse, kLookup, kModel };
constexpr int kDrafterKinds = 3;
constexpr int drafter_index(DrafterKind k) {
  return static_cast<int>(k);
}
// "sparse", "lookup", "model" (round traces).
const char *drafter_name(DrafterKind kind);

struct RoundState;

// The decoder's draft passes, run by a drafter on the context of its choice
// (the model's, or a draft model's): each pass one row per drafting
// sequence, its row the sequence's selection on the model's context and the
// draft model's own rows on the draft's.
class DraftPasses {
 public:
  // Begins the round's max_gamma passes of `work` as one chain on the
  // device (each pass fed the previous one's draws there); false, having
  // begun nothing, where the context or a sequence cannot (penalties, no
  // room reserved). finish_chain reads the drafts.
  virtual bool begin_chain(std::vector<RoundWork> &work, int32_t max_gamma, BackendContext &context,
                           ChainedDrafts *chain) = 0;
  // The passes one at a time, each draft drawn on the host.
  virtual void pass_by_pass(std::vector<RoundWork> &work, int32_t max_gamma,
                            BackendContext &context, RoundState &rs) = 0;
  // A token tree per sequence, level by level (the model's sparse passes).
  virtual void tree_levels(std::vector<RoundWork> &work, int32_t max_gamma, BackendContext &context,
                           RoundState &rs) = 0;
  // Waits for a begun chain and fills its sequences' drafts; false when the
  // backend lost their candidates (no q can then be built for them).
  virtual bool finish_chain(ChainedDrafts &chain, BackendContext &context) = 0;
  // Each chained draft's q, and the sequences' RNG cursors past their draws.
  virtual void build_chained_q(ChainedDrafts &chain) = 0;
  // After a lost chain: its sequences keep their verify rows, not their drafts.
  virtual void drop_chained_drafts(ChainedDrafts &chain) = 0;
  // Its sequences no longer chained (before a chain the verify pass does not read).
  virtual void abandon_chain(ChainedDrafts *chain) = 0;

 protected:
  ~DraftPasses() = default;
};

// One round's drafting: what the drafter fills and the means it has.
struct RoundDrafting {
  std::vector<RoundWork> &work;  // each sequence's gamma; its drafts and q to fill
  int32_t max_gamma;             // the largest gamma of work
  BackendContext &context;       // the model's, where the verify pass runs
  RoundState &rs;
  DraftPasses &passes;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual DrafterKind kind() const = 0;
  const char *name() const { return drafter_name(kind()); }

  // The last prefill chunk of `seq`'s prompt is about to run.
  virtual void begin_prompt(const Sequence & /*seq*/) {}
  // The model just prefilled rows[i] of seqs[i]'s prompt.
  virtual void follow_prefill(const std::vector<const Sequence *> & /*seqs*/,
                              const std::vector<SeqRows> & /*rows*/) {}
  // Whether its drafts cost no forward pass: a round of few sequences may
  // then draft past γ (RoundSeq::lookup_gamma).
  virtual bool drafts_without_passes() const { return false; }
  // Fills each work entry's drafts and q (q[j]: the distribution drafts[j]
  // was drawn from), gamma of them, or fewer with gamma shortened to match.
  // A chain begun on the model's context, whose draws the verify pass then
  // takes on the device, is left in round.rs (RoundState::chain_begun).
  virtual void draft(RoundDrafting &round) = 0;
  // After acceptance: work[i] kept n_accepted[i] of its drafts.
  virtual void settle(const std::vector<RoundWork> & /*work*/,
                      const std::vector<int32_t> & /*n_accepted*/) {}
  // The sequence ended: what the drafter keeps of it goes.
  virtual void forget(int32_t /*seq_id*/) {}
};

// The policy's sparse passes over the model's own KV: a chain on the device
// where it can, else pass by pass, or a token tree per sequence.
class SparseDrafter final : public Drafter {
 public:
  explicit SparseDrafter(bool trees) : trees_(trees) {}
  DrafterKind kind() const override { return DrafterKind::kSparse; }
  void draft(RoundDrafting &round) override;

 private:
  bool trees_;
};

}  // namespace vegas
