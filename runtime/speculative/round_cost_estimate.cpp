#include "speculative/round_cost_estimate.h"

#include <algorithm>

namespace vegas {

RoundCostEstimate::RoundCostEstimate(double draft_weight, double verify_weight,
                                     double fixed_rows_prior, double slope_prior_weight)
    : draft_weight_(draft_weight),
      verify_weight_(verify_weight),
      fixed_rows_prior_(fixed_rows_prior),
      slope_prior_weight_(slope_prior_weight) {}

void RoundCostEstimate::observe_draft_step(double seconds) {
  if (!(seconds >= 0.0)) return;  // NaN: a clock that went wrong
  draft_sum_ += draft_weight_ * (seconds - draft_sum_);
  draft_w_ += draft_weight_ * (1.0 - draft_w_);
}

void RoundCostEstimate::observe_verify(int32_t rows, double seconds) {
  if (rows <= 0 || !(seconds >= 0.0)) return;
  // Unnormalised sums: older observations decay by (1 - weight) per round.
  const double keep = 1.0 - verify_weight_, r = rows;
  verify_w_ = keep * verify_w_ + 1.0;
  sr_ = keep * sr_ + r;
  st_ = keep * st_ + seconds;
  srr_ = keep * srr_ + r * r;
  srt_ = keep * srt_ + r * seconds;
}

double RoundCostEstimate::draft_step_seconds() const {
  return draft_w_ > 0.0 ? draft_sum_ / draft_w_ : 0.0;
}

double RoundCostEstimate::per_row_seconds() const {
  if (verify_w_ <= 0.0) return 0.0;
  const double mean_r = sr_ / verify_w_, mean_t = st_ / verify_w_;
  const double sxx = std::max(0.0, srr_ - verify_w_ * mean_r * mean_r);
  const double sxy = srt_ - verify_w_ * mean_r * mean_t;
  const double prior_slope = mean_t / (mean_r + fixed_rows_prior_);
  const double slope = (sxy + slope_prior_weight_ * prior_slope) / (sxx + slope_prior_weight_);
  // Neither a negative slope nor a negative fixed part is physical.
  return std::clamp(slope, 0.0, mean_t / mean_r);
}

double RoundCostEstimate::verify_seconds(double rows) const {
  if (verify_w_ <= 0.0) return 0.0;
  const double mean_r = sr_ / verify_w_, mean_t = st_ / verify_w_;
  const double slope = per_row_seconds();
  return std::max(0.0, mean_t + slope * (rows - mean_r));
}

}  // namespace vegas
