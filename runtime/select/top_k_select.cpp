#include "select/top_k_select.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace vegas {

namespace {

float rank_key(float score) {
  return std::isnan(score) ? -std::numeric_limits<float>::infinity() : score;
}

}  // namespace

bool ranks_before(const float *scores, int32_t a, int32_t b) {
  const float sa = rank_key(scores[a]);
  const float sb = rank_key(scores[b]);
  if (sa != sb) return sa > sb;
  return a > b;
}

int32_t select_top_k(const float *scores, int32_t m, int32_t k, int32_t *scratch, int32_t *out) {
  k = std::clamp(k, 0, std::max(m, 0));
  if (k == 0) return 0;
  if (k == m) {  // everything: no ranking needed
    for (int32_t i = 0; i < m; ++i) out[i] = i;
    return m;
  }
  for (int32_t i = 0; i < m; ++i) scratch[i] = i;
  const auto before = [scores](int32_t a, int32_t b) { return ranks_before(scores, a, b); };
  std::nth_element(scratch, scratch + (k - 1), scratch + m, before);
  std::copy(scratch, scratch + k, out);
  std::sort(out, out + k);
  return k;
}

int32_t select_window_top_k(const float *scores, int32_t n, int32_t k, int32_t window,
                            int32_t *scratch, int32_t *out) {
  const int32_t older = n - window;
  const int32_t chosen = select_top_k(scores, older, k - window, scratch, out);
  for (int32_t i = 0; i < window; ++i) out[chosen + i] = older + i;
  return chosen + window;
}

}  // namespace vegas
