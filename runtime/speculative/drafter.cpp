#include "speculative/drafter.h"

#include "speculative/round_state.h"

namespace vegas {

const char *drafter_name(DrafterKind kind) {
  switch (kind) {
    case DrafterKind::kSparse:
      return "sparse";
    case DrafterKind::kLookup:
      return "lookup";
    case DrafterKind::kModel:
      return "model";
  }
  return "?";
}

void SparseDrafter::draft(RoundDrafting &r) {
  if (trees_) {
    r.passes.tree_levels(r.work, r.max_gamma, r.context, r.rs);
    return;
  }
  // Chained on the device where the backend can: the verify pass, enqueued
  // behind the chain with its draws fed there, runs while the host reads them.
  r.rs.chain_begun =
      r.rs.by_candidates && r.passes.begin_chain(r.work, r.max_gamma, r.context, &r.rs.chain);
  if (!r.rs.chain_begun) r.passes.pass_by_pass(r.work, r.max_gamma, r.context, r.rs);
}

}  // namespace vegas
