#include "speculative/tree_accept.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace vegas {

void distribution_without(const TokenDistribution &q, const std::vector<int32_t> &removed,
                          TokenDistribution *out) {
  out->ids.clear();
  out->probs.clear();
  double total = 0.0;
  for (size_t i = 0; i < q.ids.size(); ++i) {
    if (std::find(removed.begin(), removed.end(), q.ids[i]) != removed.end()) continue;
    if (!(q.probs[i] > 0.0f)) continue;
    out->ids.push_back(q.ids[i]);
    out->probs.push_back(q.probs[i]);
    total += q.probs[i];
  }
  if (removed.empty()) return;  // q itself (its probabilities bit for bit)
  for (float &p : out->probs) p = static_cast<float>(p / total);
}

std::vector<int32_t> draw_without_replacement(const TokenDistribution &q, int32_t n, Rng &rng) {
  std::vector<int32_t> drawn;
  TokenDistribution rest;
  for (int32_t k = 0; k < n; ++k) {
    distribution_without(q, drawn, &rest);
    if (rest.ids.empty()) break;
    drawn.push_back(sample_from(rest, rng.uniform()));
  }
  return drawn;
}

void accept_tree_greedy(const DraftTree &tree, const NodeArgmaxFn &target_argmax,
                        TreeAcceptResult *out) {
  out->path.clear();
  out->tokens.clear();
  for (int32_t node = 0;;) {
    const int32_t t = target_argmax(node);
    int32_t next = -1;
    for (int32_t c = tree.first_child(node);
         next < 0 && c < tree.first_child(node) + tree.n_children(node); ++c)
      if (tree.token(c) == t) next = c;
    out->tokens.push_back(t);
    if (next < 0) return;  // the correction, or the bonus after a leaf
    out->path.push_back(next);
    node = next;
  }
}

void accept_tree_sampled(const DraftTree &tree, const std::vector<TokenDistribution> &q,
                         const NodeTargetFn &target, Rng &rng, TreeAcceptResult *out,
                         ResidualRule residual_rule) {
  out->path.clear();
  out->tokens.clear();
  TokenDistribution p, q_k, residual;
  std::vector<int32_t> rejected;
  for (int32_t node = 0;;) {
    p = target(node);
    const int32_t first = tree.first_child(node), m = tree.n_children(node);
    if (m > 0 && static_cast<size_t>(node) >= q.size())
      fail(VEGAS_ERR_INVALID_ARGUMENT, "tree acceptance: node " + std::to_string(node) +
                                           " has drafts but no draft distribution");
    int32_t next = -1;
    rejected.clear();
    for (int32_t c = first; c < first + m; ++c) {
      distribution_without(q[static_cast<size_t>(node)], rejected, &q_k);
      const int32_t x = tree.token(c);
      const double qx = q_k.prob_of(x);
      if (!(qx > 0.0))
        fail(VEGAS_ERR_INVALID_ARGUMENT,
             "tree acceptance: draft node " + std::to_string(c) + " (token " + std::to_string(x) +
                 ") has probability 0 under the distribution it was drawn from");
      // u < p/q, written without the division; always true when p >= q.
      if (rng.uniform() * qx < p.prob_of(x)) {
        next = c;
        break;
      }
      if (residual_rule == ResidualRule::kLossless) {
        residual_distribution(p, q_k, &residual);
        if (!residual.ids.empty()) p.ids.swap(residual.ids), p.probs.swap(residual.probs);
      }
      rejected.push_back(x);
    }
    if (next < 0) {  // every child rejected, or a leaf: the token after the path
      out->tokens.push_back(sample_from(p, rng.uniform()));
      return;
    }
    out->path.push_back(next);
    out->tokens.push_back(tree.token(next));
    node = next;
  }
}

}  // namespace vegas
