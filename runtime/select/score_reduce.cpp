#include "select/score_reduce.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "common/worker_pool.h"

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

namespace {

// reduce_scores over the positions [begin, end): each position's sum in the
// same (row, head) order whatever the range, so ranges on other threads give
// the same bits as one pass.
void reduce_range(const ScoreView &view, int32_t n_heads, const int32_t *rows, int32_t n_used,
                  int64_t begin, int64_t end, ScoreKind kind, float *out) {
  for (int64_t pos = begin; pos < end; ++pos) out[pos] = 0.0f;
  for (int32_t r = 0; r < n_used; ++r) {
    for (int32_t h = 0; h < n_heads; ++h) {
      const int64_t line = static_cast<int64_t>(rows[r]) * n_heads + h;
      const float *logit = view.logits + line * view.stride;
      if (kind == ScoreKind::kWeight) {
        const float lse = view.lse[line];
        for (int64_t pos = begin; pos < end; ++pos) out[pos] += std::exp(logit[pos] - lse);
      } else {
        for (int64_t pos = begin; pos < end; ++pos) out[pos] += logit[pos];
      }
    }
  }
  const float inv = 1.0f / static_cast<float>(static_cast<int64_t>(n_used) * n_heads);
  for (int64_t pos = begin; pos < end; ++pos) out[pos] *= inv;
}

// Below this many terms a reduction stays on the calling thread (waking the
// workers costs microseconds).
constexpr int64_t kThreadedTerms = int64_t{1} << 16;
// Positions a thread takes at least.
constexpr int64_t kPositionsPerThread = 1024;

}  // namespace

void reduce_scores(const ScoreView &view, int32_t n_heads, const int32_t *rows, int32_t n_used,
                   int32_t n, ScoreKind kind, float *out, int threads) {
  const int64_t terms = int64_t{n} * n_used * n_heads;
  const int used = static_cast<int>(std::min<int64_t>(
      {threads, kMaxReduceThreads, std::max<int64_t>(1, n / kPositionsPerThread)}));
  if (terms < kThreadedTerms || used <= 1) {
    reduce_range(view, n_heads, rows, n_used, 0, n, kind, out);
    return;
  }
  parallel_ranges(n, used, 0, [&](int64_t begin, int64_t end, int) {
    reduce_range(view, n_heads, rows, n_used, begin, end, kind, out);
  });
}

}  // namespace vegas
