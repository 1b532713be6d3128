#include "speculative/draft_scores.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace vegas {

void map_draft_scores(const float *from_logits, const float *from_lse, const ScoreShape &from,
                      float *to_logits, float *to_lse, const ScoreShape &to) {
  if (from.rows != to.rows || from.n != to.n || from.layers < 1 || from.heads < 1 ||
      to.layers < 1 || to.heads < 1 || to.rows < 0 || to.n < 0)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "draft scores of " + std::to_string(from.rows) + " rows x " +
                                         std::to_string(from.n) + " candidates cannot stand for " +
                                         std::to_string(to.rows) + " x " + std::to_string(to.n));
  const int64_t n = to.n;
  for (int32_t l = 0; l < to.layers; ++l) {
    const int32_t dl = static_cast<int32_t>(int64_t{l} * from.layers / to.layers);
    for (int32_t r = 0; r < to.rows; ++r)
      for (int32_t h = 0; h < to.heads; ++h) {
        const int32_t dh = static_cast<int32_t>(int64_t{h} * from.heads / to.heads);
        const int64_t src = (int64_t{dl} * from.rows + r) * from.heads + dh;
        const int64_t dst = (int64_t{l} * to.rows + r) * to.heads + h;
        to_lse[dst] = from_lse[src];
        std::copy(from_logits + src * n, from_logits + (src + 1) * n, to_logits + dst * n);
      }
  }
}

}  // namespace vegas
