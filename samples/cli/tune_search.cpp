#include "tune_search.h"

#include <algorithm>

namespace vegas_cli {

const TunePoint &BucketPoints::at(const SpecSettings &spec, int32_t step) {
  const auto key = std::make_tuple(spec.label, spec.gamma, spec.ratio);
  auto it = index_.find(key);
  if (it != index_.end()) return points_[it->second];
  TunePoint p = measure_(spec);
  p.spec = spec;
  p.step = step;
  index_.emplace(key, points_.size());
  points_.push_back(std::move(p));
  return points_.back();
}

const TunePoint *BucketPoints::best_of(const std::function<bool(const TunePoint &)> &keep) const {
  const TunePoint *best = nullptr;
  for (const TunePoint &p : points_)
    if (keep(p) && (best == nullptr || p.tokens_per_s > best->tokens_per_s)) best = &p;
  return best;
}

CandidateResult tune_candidate(const SpecSettings &candidate, const TuneGrid &grid,
                               BucketPoints &points) {
  CandidateResult r;
  r.label = candidate.label;
  const std::vector<float> &ratios = grid.ratios;
  auto at = [&](int32_t gamma, size_t ratio_index, int32_t step) -> const TunePoint & {
    SpecSettings s = candidate;
    s.gamma = gamma;
    s.ratio = ratios[ratio_index];
    return points.at(s, step);
  };

  // Prompt lookup and a draft model select nothing, so they draft alike at
  // every ratio: they are measured at the first one only, in all three steps.
  const bool selects = candidate.policy != "lookup" && candidate.draft_model == nullptr;
  const size_t n_ratios = selects ? ratios.size() : 1;

  // Step 1: τ against the ratio at a large γ; the knee.
  std::vector<double> tau(n_ratios);
  for (size_t i = 0; i < n_ratios; ++i) tau[i] = at(grid.large_gamma, i, 1).tau;
  r.best_tau = *std::max_element(tau.begin(), tau.end());
  size_t knee = 0;
  while (tau[knee] < (1.0 - grid.tau_tolerance) * r.best_tau) ++knee;
  r.knee_ratio = ratios[knee];

  // Step 2: γ at the knee, for tokens/s.
  r.gamma = grid.gammas.front();
  double best = -1.0;
  for (int32_t g : grid.gammas) {
    const double tps = at(g, knee, 2).tokens_per_s;
    if (tps > best) {
      best = tps;
      r.gamma = g;
    }
  }

  // Step 3: the ratio around the knee at that γ, each way while tokens/s rises.
  size_t best_index = knee;
  for (int dir : {-1, +1}) {
    for (long j = static_cast<long>(knee) + dir; j >= 0 && j < static_cast<long>(n_ratios);
         j += dir) {
      const double tps = at(r.gamma, static_cast<size_t>(j), 3).tokens_per_s;
      if (tps <= best) break;
      best = tps;
      best_index = static_cast<size_t>(j);
    }
  }
  r.ratio = ratios[best_index];
  r.tokens_per_s = best;
  return r;
}

nlohmann::json point_json(const TunePoint &p) {
  return {{"label", p.spec.label},
          {"policy", p.spec.policy},
          {"window_share", tidy(p.spec.window_share)},
          {"gamma", p.spec.gamma},
          {"ratio", tidy(p.spec.ratio)},
          {"step", p.step},
          {"tau", p.tau},
          {"tokens_per_s", p.tokens_per_s},
          {"steady", p.steady}};
}

nlohmann::json candidate_json(const CandidateResult &c) {
  return {
      {"label", c.label},       {"step1_best_tau", c.best_tau}, {"knee_ratio", tidy(c.knee_ratio)},
      {"step2_gamma", c.gamma}, {"step3_ratio", tidy(c.ratio)}, {"tokens_per_s", c.tokens_per_s}};
}

}  // namespace vegas_cli
