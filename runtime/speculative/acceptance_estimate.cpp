#include "speculative/acceptance_estimate.h"

#include <algorithm>

namespace vegas {

AcceptanceEstimate::AcceptanceEstimate(int32_t positions, double ema_weight, double prior,
                                       double prior_rounds, double shrink_rounds)
    : ema_weight_(ema_weight),
      prior_(prior),
      // One round adds ema_weight to a weight at first; a prior of no weight
      // at all would divide by zero before the first round.
      prior_left_(std::max(prior_rounds, 1e-3) * ema_weight),
      shrink_weight_(std::max(shrink_rounds, 0.0) * ema_weight),
      sum_(static_cast<size_t>(std::max(positions, 1)), 0.0),
      weight_(sum_.size(), 0.0),
      reached_(sum_.size(), 0) {}

void AcceptanceEstimate::observe(int32_t drafted, int32_t accepted) {
  // Position i is reached when drafts 0..i-1 were all accepted.
  const int32_t reached = std::min({drafted, accepted + 1, static_cast<int32_t>(sum_.size())});
  if (reached <= 0) return;
  const double keep = 1.0 - ema_weight_;
  for (int32_t i = 0; i < reached; ++i) {
    const size_t k = static_cast<size_t>(i);
    const double x = i < accepted ? 1.0 : 0.0;
    sum_[k] = keep * sum_[k] + ema_weight_ * x;
    weight_[k] = keep * weight_[k] + ema_weight_;
    reached_[k] += 1;
  }
  // The pooled average: one round's draws together, aged once per round.
  pooled_sum_ = keep * pooled_sum_ + ema_weight_ * std::min(accepted, reached);
  pooled_weight_ = keep * pooled_weight_ + ema_weight_ * reached;
  prior_left_ *= keep;
}

double AcceptanceEstimate::pooled() const {
  return (pooled_sum_ + prior_left_ * prior_) / (pooled_weight_ + prior_left_);
}

double AcceptanceEstimate::alpha(int32_t position) const {
  const double base = pooled();
  double a = base;
  const int32_t last = std::min(std::max(position, 0), static_cast<int32_t>(sum_.size()) - 1);
  for (int32_t i = 0; i <= last; ++i) {
    const size_t k = static_cast<size_t>(i);
    if (reached_[k] == 0) break;  // never reached: keep the last reached estimate
    a = (sum_[k] + shrink_weight_ * base) / (weight_[k] + shrink_weight_);
  }
  return a;
}

double AcceptanceEstimate::expected_tokens(int32_t gamma) const {
  double tokens = 1.0, reach = 1.0;
  for (int32_t j = 0; j < gamma; ++j) {
    reach *= alpha(j);
    tokens += reach;
  }
  return tokens;
}

int64_t AcceptanceEstimate::reached(int32_t position) const {
  if (position < 0 || position >= static_cast<int32_t>(reached_.size())) return 0;
  return reached_[static_cast<size_t>(position)];
}

}  // namespace vegas
