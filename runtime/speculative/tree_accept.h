// Lossless acceptance on a tree of drafts (DraftTree; DESIGN §6). Greedy: the
// longest path whose every draft is the target's argmax after its parent, then
// the target's token. Sampling: recursive rejection sampling without
// replacement (Jeon et al. 2024, the multi-draft rule of SpecInfer for
// distinct drafts): a node's children x_1..x_m were drawn one after another
// from q, q without x_1, ..., so at the node x_k is accepted with probability
// min(1, p_k(x_k) / q_k(x_k)), where p_1 is the target, p_{k+1} =
// norm(max(0, p_k - q_k)) and q_k is q without x_1..x_{k-1}; the first
// accepted child is moved to, and when all are rejected the token is drawn
// from p_{m+1}. Each level is then distributed exactly as the target, so the
// committed tokens are too. With one child per node it is accept_sampled's
// chain rule, draw for draw.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sampling/sampling.h"
#include "sampling/speculative_accept.h"
#include "speculative/draft_tree.h"

namespace vegas {

struct TreeAcceptResult {
  std::vector<int32_t> path;    // accepted nodes, the root's child first
  std::vector<int32_t> tokens;  // their drafts, then one corrected or bonus token
  int32_t n_accepted() const { return static_cast<int32_t>(path.size()); }
};

// q without the `removed` tokens, renormalised (empty when nothing is left).
void distribution_without(const TokenDistribution &q, const std::vector<int32_t> &removed,
                          TokenDistribution *out);

// Up to n distinct tokens drawn from q without replacement, one rng.uniform()
// each: draw k from distribution_without(q, the draws before it). Fewer when
// q's support is smaller.
std::vector<int32_t> draw_without_replacement(const TokenDistribution &q, int32_t n, Rng &rng);

// The target argmax after each node; called along the accepted path only.
using NodeArgmaxFn = std::function<int32_t(int32_t node)>;
void accept_tree_greedy(const DraftTree &tree, const NodeArgmaxFn &target_argmax,
                        TreeAcceptResult *out);

// The target distribution after each node (the reference stays valid while
// the acceptance runs); called along the accepted path only.
using NodeTargetFn = std::function<const TokenDistribution &(int32_t node)>;
// `q[node]`: the distribution the node's children were drawn from (as
// draw_without_replacement does). Errors: INVALID_ARGUMENT (a child outside
// it, or a node with children and no q).
void accept_tree_sampled(const DraftTree &tree, const std::vector<TokenDistribution> &q,
                         const NodeTargetFn &target, Rng &rng, TreeAcceptResult *out,
                         ResidualRule residual_rule = ResidualRule::kLossless);

}  // namespace vegas
