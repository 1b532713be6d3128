// The measured cost of a speculative round, as moving averages: the seconds of
// one draft step, and the seconds of a verification pass as a line in its row
// count, t(rows) = fixed + per_row * rows. The line is a ridge regression over
// the exponentially weighted (rows, seconds) observations, pulled towards a
// prior slope: while every observation has the same row count (one γ so far)
// the slope cannot be measured, and the prior says that the fixed part of a
// pass (weights read once, launches) is worth `fixed_rows_prior` rows. Once
// rounds with different row counts were seen (after a γ switch, or batches that
// change), the data outweighs the prior.
#pragma once

#include <cstdint>

namespace vegas {

class RoundCostEstimate {
 public:
  // `draft_weight`, `verify_weight`: each new observation's weight in (0, 1];
  // `slope_prior_weight`: the prior slope counts as that much spread in
  // (weight x rows^2) units.
  RoundCostEstimate(double draft_weight, double verify_weight, double fixed_rows_prior,
                    double slope_prior_weight);

  void observe_draft_step(double seconds);
  void observe_verify(int32_t rows, double seconds);
  // Both kinds observed at least once.
  bool ready() const { return draft_w_ > 0.0 && verify_w_ > 0.0; }

  double draft_step_seconds() const;
  // Seconds of a verification pass of `rows` rows (> 0).
  double verify_seconds(double rows) const;
  double per_row_seconds() const;

 private:
  double draft_weight_, verify_weight_, fixed_rows_prior_, slope_prior_weight_;
  double draft_sum_ = 0.0, draft_w_ = 0.0;
  // Exponentially weighted sums of 1, r, t, r^2 and r*t.
  double verify_w_ = 0.0, sr_ = 0.0, st_ = 0.0, srr_ = 0.0, srt_ = 0.0;
};

}  // namespace vegas
