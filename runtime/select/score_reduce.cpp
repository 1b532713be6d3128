#include "select/score_reduce.h"

#include <cmath>
#include <string>

#include "common/error.h"

namespace vegas {

void check_score_view(const ScoreView &view, int32_t n, int32_t rows_needed,
                      const std::string &policy) {
  if (n == 0) return;  // nothing is read
  if (view.logits == nullptr || view.lse == nullptr)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "selection policy " + policy + ": the score view has no logits or no lse");
  if (view.n_rows < rows_needed)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "selection policy " + policy + " needs " + std::to_string(rows_needed) +
             " verify rows, the score view has " + std::to_string(view.n_rows));
  if (view.stride < n)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "selection policy " + policy + ": score view stride " +
                                         std::to_string(view.stride) +
                                         " is below n = " + std::to_string(n));
}

void reduce_scores(const ScoreView &view, int32_t n_heads, const int32_t *rows, int32_t n_used,
                   int32_t n, ScoreKind kind, float *out) {
  for (int32_t pos = 0; pos < n; ++pos) out[pos] = 0.0f;
  for (int32_t r = 0; r < n_used; ++r) {
    for (int32_t h = 0; h < n_heads; ++h) {
      const int64_t line = static_cast<int64_t>(rows[r]) * n_heads + h;
      const float *logit = view.logits + line * view.stride;
      if (kind == ScoreKind::kWeight) {
        const float lse = view.lse[line];
        for (int32_t pos = 0; pos < n; ++pos) out[pos] += std::exp(logit[pos] - lse);
      } else {
        for (int32_t pos = 0; pos < n; ++pos) out[pos] += logit[pos];
      }
    }
  }
  const float inv = 1.0f / static_cast<float>(static_cast<int64_t>(n_used) * n_heads);
  for (int32_t pos = 0; pos < n; ++pos) out[pos] *= inv;
}

}  // namespace vegas
