// Top-p of attention weights without sorting (SpecAttn's nucleus selection):
// the smallest set, in the ranking of top_k_select.h, whose mass reaches
// p * (sum of all weights), found by bisecting a threshold with one parallel
// sum per round.
//
// The bisection runs over the bit patterns of the weights: for non-negative
// floats the IEEE-754 bit pattern read as an integer orders like the value, so
// at most 31 rounds find the exact threshold v = the largest weight with
// mass(w >= v) >= target (value bisection in ~10-20 rounds only brackets it and
// would need a sort of the bracket). Everything above v is taken; weights equal
// to v are taken latest position first, only as many as the mass needs, so the
// set is minimal even when many weights tie at the threshold.
#pragma once

#include <cstdint>

namespace vegas {

struct TopPStats {
  int32_t rounds = 0;   // bisection rounds (parallel sums) used
  double target = 0.0;  // p * total mass
  double mass = 0.0;    // mass of the returned set before any min_count padding
};

// weights: n finite, non-negative values (throws INVALID_ARGUMENT naming the
// position otherwise). Writes the set ascending to out and returns its size.
// When the set is smaller than min(min_count, n), the best min(min_count, n)
// by the ranking are returned instead (a superset: the top-p set is a prefix of
// the ranking). `scratch` holds n ints. Sums are in double, in position order.
int32_t select_top_p(const float *weights, int32_t n, float p, int32_t min_count, int32_t *scratch,
                     int32_t *out, TopPStats *stats = nullptr);

}  // namespace vegas
