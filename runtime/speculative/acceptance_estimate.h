// Per-position acceptance of one sequence's drafts, as exponential moving
// averages: alpha(i) estimates P(draft i accepted | drafts 0..i-1 accepted),
// from the rounds that reached position i. From it, the expected tokens a round
// of γ drafts commits (refinement_controller.h chooses γ with it).
//
// One position sees one Bernoulli draw per round, so its own average is noisy
// (±0.07 at α 0.9 with a 10-round memory) and a product over several positions
// more so. Each position's estimate is therefore shrunk towards the pooled
// acceptance of all positions (a fixed `shrink_rounds` worth of weight): a real
// drop at deep positions shows after a few rounds, one unlucky round does not.
// Positions no round has reached yet take the estimate of the last reached one.
#pragma once

#include <cstdint>
#include <vector>

namespace vegas {

class AcceptanceEstimate {
 public:
  // `positions`: the largest γ asked about (later positions extrapolate);
  // `ema_weight`: the weight of each new observation in (0, 1]; `prior`,
  // `prior_rounds`: the pooled acceptance starts as if `prior_rounds` rounds
  // had shown `prior` (that prior ages like an observation); `shrink_rounds`:
  // the pooled estimate's weight in each position's estimate, in rounds.
  AcceptanceEstimate(int32_t positions, double ema_weight, double prior, double prior_rounds,
                     double shrink_rounds);

  // One round: `drafted` drafts of which the first `accepted` were accepted.
  void observe(int32_t drafted, int32_t accepted);

  double alpha(int32_t position) const;
  // The acceptance of all reached positions together.
  double pooled() const;
  // 1 + sum_{j=1..gamma} prod_{i<j} alpha(i): the committed tokens a round of
  // gamma drafts is expected to give (corrected or bonus token included).
  double expected_tokens(int32_t gamma) const;
  // Rounds that reached `position` (a plain count, for tests and logs).
  int64_t reached(int32_t position) const;

 private:
  double ema_weight_;
  double prior_;
  double prior_left_;     // the prior's weight in the pooled estimate, aging
  double shrink_weight_;  // shrink_rounds in the EMA's weight units
  double pooled_sum_ = 0.0, pooled_weight_ = 0.0;
  std::vector<double> sum_;     // EMA of accepted (1/0) per position
  std::vector<double> weight_;  // EMA of 1 per position (bias correction)
  std::vector<int64_t> reached_;
};

}  // namespace vegas
