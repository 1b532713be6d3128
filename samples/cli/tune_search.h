// The Vegas paper's three-step tuning of one speculative candidate (a policy
// and window share) in one (context, batch) bucket:
//  1. sweep the ratio at a large γ; the knee is the smallest ratio whose τ is
//     within `tau_tolerance` of the best τ of the sweep (where τ stops rising);
//  2. sweep γ at the knee for measured tokens/s;
//  3. adjust the ratio at that γ: step from the knee to neighbouring ratios of
//     the list, each way, while tokens/s keeps rising.
// The setting a bucket gets is the highest tokens/s of every point measured in
// it, over all candidates and steps. A candidate without selection ("lookup",
// or a separate draft model) is measured at the first ratio only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_measure.h"

namespace vegas_cli {

struct TuneGrid {
  std::vector<float> ratios;    // ascending, distinct
  std::vector<int32_t> gammas;  // step 2
  int32_t large_gamma = 10;     // step 1
  double tau_tolerance = 0.05;  // step 1: "within 5% of the best τ"
};

// One measured setting of a bucket.
struct TunePoint {
  SpecSettings spec;
  int32_t step = 0;  // the step that first measured it
  double tau = 0.0;
  double tokens_per_s = 0.0;
  bool steady = false;
};

// Measures each (candidate, γ, ratio) of a bucket once, whichever step asks.
class BucketPoints {
 public:
  using MeasureFn = std::function<TunePoint(const SpecSettings &)>;
  explicit BucketPoints(MeasureFn measure) : measure_(std::move(measure)) {}
  const TunePoint &at(const SpecSettings &spec, int32_t step);
  // In measurement order.
  const std::vector<TunePoint> &all() const { return points_; }
  // The point of highest tokens/s (the first of equals) among the points
  // `keep` accepts; null when it accepts none.
  const TunePoint *best_of(const std::function<bool(const TunePoint &)> &keep) const;

 private:
  MeasureFn measure_;
  std::vector<TunePoint> points_;
  std::map<std::tuple<std::string, int32_t, float>, size_t> index_;
};

// What the three steps found for one candidate.
struct CandidateResult {
  std::string label;
  double best_tau = 0.0;  // step 1
  float knee_ratio = 0.0f;
  int32_t gamma = 0;   // step 2
  float ratio = 0.0f;  // step 3
  double tokens_per_s = 0.0;
};

CandidateResult tune_candidate(const SpecSettings &candidate, const TuneGrid &grid,
                               BucketPoints &points);

nlohmann::json point_json(const TunePoint &p);
nlohmann::json candidate_json(const CandidateResult &c);

}  // namespace vegas_cli
