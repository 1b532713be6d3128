// The one reduction every score-driven policy shares: per candidate, the mean
// over some verify rows and all query heads of the softmax weight or the logit.
#pragma once

#include <cstdint>
#include <string>

#include "select/select_options.h"
#include "select/select_policy.h"

namespace vegas {

// Throws INVALID_ARGUMENT (naming `policy`) unless `view` holds at least
// `rows_needed` rows with non-null logits/lse and a stride covering n.
void check_score_view(const ScoreView &view, int32_t n, int32_t rows_needed,
                      const std::string &policy);

// out[pos] = mean over rows[0..n_used) and heads [0, n_heads) of
//   exp(logit - lse)  (kWeight) or logit (kLogit), for pos in [0, n).
// Accumulates in float in a fixed order (row, head) for each position, so the
// result is deterministic: the same bits however many threads share the
// positions. Up to `threads` of the library's workers (at most
// kMaxReduceThreads, each 1,024 positions or more) take part where the terms
// are many: a host-side selection at long contexts (8 layers x 8 heads x 8K
// exp a sequence: ~2 ms on one core). Values are not checked: a NaN logit
// gives a NaN score.
void reduce_scores(const ScoreView &view, int32_t n_heads, const int32_t *rows, int32_t n_used,
                   int32_t n, ScoreKind kind, float *out, int threads = 1);

constexpr int kMaxReduceThreads = 8;

}  // namespace vegas
