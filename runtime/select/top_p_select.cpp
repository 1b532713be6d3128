#include "select/top_p_select.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/error.h"
#include "select/top_k_select.h"

namespace vegas {

namespace {

uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Mass of the weights whose bit pattern is >= threshold_bits (one parallel sum).
double mass_at_or_above(const float *weights, int32_t n, uint32_t threshold_bits) {
  double mass = 0.0;
  for (int32_t i = 0; i < n; ++i)
    if (bits_of(weights[i]) >= threshold_bits) mass += weights[i];
  return mass;
}

}  // namespace

int32_t select_top_p(const float *weights, int32_t n, float p, int32_t min_count, int32_t *scratch,
                     int32_t *out, TopPStats *stats) {
  double total = 0.0;
  uint32_t max_bits = 0;
  for (int32_t i = 0; i < n; ++i) {
    const float w = weights[i];
    if (!(w >= 0.0f) || std::isinf(w))
      fail(VEGAS_ERR_INVALID_ARGUMENT, "topp selection: the weight at position " +
                                           std::to_string(i) + " is " + std::to_string(w) +
                                           ", not a finite non-negative number");
    total += w;
    if (bits_of(w) > max_bits) max_bits = bits_of(w);
  }
  const double target = static_cast<double>(p) * total;
  TopPStats local;
  local.target = target;

  int32_t count = 0;
  if (target > 0.0) {
    // Invariant: mass(>= lo) >= target, mass(>= hi) < target.
    uint32_t lo = 0;
    uint32_t hi = max_bits + 1;
    while (hi - lo > 1) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (mass_at_or_above(weights, n, mid) >= target) {
        lo = mid;
      } else {
        hi = mid;
      }
      ++local.rounds;
    }
    // lo is the bit pattern of an actual weight v > 0 (the invariant forces one).
    double mass = 0.0;
    for (int32_t i = 0; i < n; ++i)
      if (bits_of(weights[i]) > lo) mass += weights[i];
    // Ties at v, latest first, until the mass is reached; tie_cut is the first
    // tied position kept. Rounding in a different summation order can leave
    // the mass a hair short with every tie taken: then all ties stay.
    int32_t tie_cut = n;
    for (int32_t i = n - 1; i >= 0 && mass < target; --i) {
      if (bits_of(weights[i]) == lo) {
        mass += weights[i];
        tie_cut = i;
      }
    }
    for (int32_t i = 0; i < n; ++i) {
      const uint32_t b = bits_of(weights[i]);
      if (b > lo || (b == lo && i >= tie_cut)) out[count++] = i;
    }
    local.mass = mass;
  }
  if (stats) *stats = local;

  const int32_t floor_count = std::min(min_count, n);
  if (count < floor_count) return select_top_k(weights, n, floor_count, scratch, out);
  return count;
}

}  // namespace vegas
