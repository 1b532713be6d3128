// The lossless acceptance rule of speculative decoding (DESIGN §6): which of
// γ draft tokens one sequence keeps after verification, and the one corrected
// or bonus token that follows them. With these rules the committed tokens are
// distributed exactly as plain decoding from the target distributions.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sampling/sampling.h"

namespace vegas {

struct AcceptResult {
  int32_t n_accepted = 0;       // drafts kept, 0..γ
  std::vector<int32_t> tokens;  // the n_accepted drafts, then one corrected or bonus token
};

// Greedy: keep drafts while drafts[i] == target_argmax[i], then emit
// target_argmax at the first mismatch (or the bonus target_argmax[γ]).
// `target_argmax` holds the γ+1 argmaxes of the verify rows, so only γ+1 ids
// need to leave the device.
void accept_greedy(const int32_t *drafts, int32_t gamma, const int32_t *target_argmax,
                   AcceptResult *out);

// The target distribution of verify row i (0..γ): p_{i+1}, built with the
// sequence's params and the history ending in the drafts before it. Called in
// row order and only up to the first rejection, so rows after a rejection are
// never built.
using TargetDistributionFn = std::function<const TokenDistribution &(int32_t row)>;

// Where the token after a rejection comes from. Only kLossless is correct;
// kBrokenFromTarget (draw it from p instead of norm(max(0, p - q))) exists so
// that statistical tests can prove they detect a broken acceptance rule.
enum class ResidualRule { kLossless, kBrokenFromTarget };

// Sampling: accept drafts[i] with probability min(1, p_i(x)/q_i(x)) using one
// rng.uniform() each; on the first rejection draw from norm(max(0, p_i - q_i))
// (from p_i if that is all zero); if every draft is kept, draw the bonus from
// p_{γ+1}. `draft_dists[i]` must be exactly the distribution drafts[i] was drawn
// from. Errors: INVALID_ARGUMENT (gamma < 0, a draft outside its distribution's
// support, an empty distribution).
void accept_sampled(const int32_t *drafts, const TokenDistribution *draft_dists, int32_t gamma,
                    const TargetDistributionFn &target, Rng &rng, AcceptResult *out,
                    ResidualRule residual_rule = ResidualRule::kLossless);

// The same with all γ+1 target distributions built up front.
void accept_sampled(const int32_t *drafts, const TokenDistribution *draft_dists, int32_t gamma,
                    const TokenDistribution *target_dists, Rng &rng, AcceptResult *out);

// norm(max(0, p - q)) as a distribution over p's support (id order); empty when
// p <= q everywhere (then p == q up to rounding).
void residual_distribution(const TokenDistribution &p, const TokenDistribution &q,
                           TokenDistribution *out);

}  // namespace vegas
