// Brute-force references for the selection tests: everything by a full sort,
// written independently of runtime/select (which avoids full sorts).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace vegas {
namespace select_ref {

// The documented ranking: score descending, NaN as -inf, ties by later position.
inline std::vector<int32_t> ranked(const std::vector<float> &scores, int32_t m) {
  std::vector<int32_t> order(static_cast<size_t>(m));
  for (int32_t i = 0; i < m; ++i) order[i] = i;
  const auto key = [&](int32_t i) {
    return std::isnan(scores[i]) ? -std::numeric_limits<float>::infinity() : scores[i];
  };
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    if (key(a) != key(b)) return key(a) > key(b);
    return a > b;
  });
  return order;
}

inline std::vector<int32_t> top_k(const std::vector<float> &scores, int32_t m, int32_t k) {
  std::vector<int32_t> order = ranked(scores, m);
  order.resize(static_cast<size_t>(std::min(k, m)));
  std::sort(order.begin(), order.end());
  return order;
}

// Scores drawn from only `levels` distinct values, so ties are everywhere.
inline std::vector<float> tied_scores(std::mt19937 &rng, int32_t n, int levels) {
  std::uniform_int_distribution<int> pick(0, levels - 1);
  std::vector<float> s(static_cast<size_t>(n));
  for (auto &v : s) v = static_cast<float>(pick(rng)) * 0.25f;
  return s;
}

inline std::vector<float> uniform_scores(std::mt19937 &rng, int32_t n, float lo, float hi) {
  std::uniform_real_distribution<float> pick(lo, hi);
  std::vector<float> s(static_cast<size_t>(n));
  for (auto &v : s) v = pick(rng);
  return s;
}

}  // namespace select_ref
}  // namespace vegas
