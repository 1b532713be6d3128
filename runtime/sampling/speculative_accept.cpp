#include "sampling/speculative_accept.h"

#include <string>

#include "common/error.h"

namespace vegas {

namespace {

void check_gamma(const int32_t *drafts, int32_t gamma, const void *per_row, const char *what) {
  if (gamma < 0)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "speculative acceptance: gamma " + std::to_string(gamma) + " < 0");
  if ((gamma > 0 && drafts == nullptr) || per_row == nullptr)
    fail(VEGAS_ERR_INVALID_ARGUMENT, std::string("speculative acceptance: missing ") + what);
}

}  // namespace

void accept_greedy(const int32_t *drafts, int32_t gamma, const int32_t *target_argmax,
                   AcceptResult *out) {
  check_gamma(drafts, gamma, target_argmax, "drafts or target argmaxes");
  out->tokens.clear();
  int32_t i = 0;
  while (i < gamma && drafts[i] == target_argmax[i]) out->tokens.push_back(drafts[i++]);
  out->n_accepted = i;
  out->tokens.push_back(target_argmax[i]);  // the correction, or the bonus when i == gamma
}

void residual_distribution(const TokenDistribution &p, const TokenDistribution &q,
                           TokenDistribution *out) {
  out->ids.clear();
  out->probs.clear();
  // Both supports are in ascending id order: one merge pass.
  size_t k = 0;
  double total = 0.0;
  for (size_t j = 0; j < p.ids.size(); ++j) {
    while (k < q.ids.size() && q.ids[k] < p.ids[j]) ++k;
    const float qv = (k < q.ids.size() && q.ids[k] == p.ids[j]) ? q.probs[k] : 0.0f;
    const float r = p.probs[j] - qv;
    if (r > 0.0f) {
      out->ids.push_back(p.ids[j]);
      out->probs.push_back(r);
      total += r;
    }
  }
  for (float &v : out->probs) v = static_cast<float>(v / total);
}

void accept_sampled(const int32_t *drafts, const TokenDistribution *draft_dists, int32_t gamma,
                    const TargetDistributionFn &target, Rng &rng, AcceptResult *out,
                    ResidualRule residual_rule) {
  check_gamma(drafts, gamma, gamma > 0 ? static_cast<const void *>(draft_dists) : &target,
              "draft distributions");
  out->tokens.clear();
  for (int32_t i = 0; i < gamma; ++i) {
    const TokenDistribution &p = target(i);
    const int32_t x = drafts[i];
    const double qx = draft_dists[i].prob_of(x);
    if (!(qx > 0.0))
      fail(VEGAS_ERR_INVALID_ARGUMENT,
           "speculative acceptance: draft " + std::to_string(i) + " (token " + std::to_string(x) +
               ") has probability 0 under the distribution it was drawn from");
    const double px = p.prob_of(x);
    // u < p/q, written without the division; always true when p >= q.
    if (rng.uniform() * qx < px) {
      out->tokens.push_back(x);
      continue;
    }
    out->n_accepted = i;
    TokenDistribution residual;
    if (residual_rule == ResidualRule::kLossless)
      residual_distribution(p, draft_dists[i], &residual);
    out->tokens.push_back(sample_from(residual.ids.empty() ? p : residual, rng.uniform()));
    return;
  }
  out->n_accepted = gamma;
  out->tokens.push_back(sample_from(target(gamma), rng.uniform()));
}

void accept_sampled(const int32_t *drafts, const TokenDistribution *draft_dists, int32_t gamma,
                    const TokenDistribution *target_dists, Rng &rng, AcceptResult *out) {
  if (target_dists == nullptr)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "speculative acceptance: missing target distributions");
  accept_sampled(
      drafts, draft_dists, gamma,
      [target_dists](int32_t row) -> const TokenDistribution & { return target_dists[row]; }, rng,
      out);
}

}  // namespace vegas
