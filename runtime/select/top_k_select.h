// Top-k of candidate scores, alone or with a reserved recent window (the
// hybrid that wins on our model, bench/REFERENCE.md).
//
// Ranking, used by every score-driven policy: a higher score first; equal
// scores prefer the later (more recent) position; NaN ranks below every number
// (NaN and -inf are then ordered by position). This is a strict total order, so
// the chosen set is unique and the host and device versions can agree exactly.
#pragma once

#include <cstdint>

namespace vegas {

// True when candidate a ranks before candidate b.
bool ranks_before(const float *scores, int32_t a, int32_t b);

// The best min(k, m) of positions [0, m) by the ranking above, written to out
// ascending. `scratch` holds m ints. Returns the count.
int32_t select_top_k(const float *scores, int32_t m, int32_t k, int32_t *scratch, int32_t *out);

// The hybrid: the `window` most recent candidates [n - window, n) plus the best
// k - window of [0, n - window); window <= k <= n. Ascending; returns k.
int32_t select_window_top_k(const float *scores, int32_t n, int32_t k, int32_t window,
                            int32_t *scratch, int32_t *out);

}  // namespace vegas
