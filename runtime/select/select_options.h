// The knobs of KV selection (DESIGN §5) and the budget rule every
// budget-driven policy shares.
#pragma once

#include <cstdint>

#include "vegas.h"

namespace vegas {

// What one candidate's score is averaged from (vegas_score_kind in the ABI).
enum class ScoreKind : int32_t {
  kWeight = VEGAS_SCORE_WEIGHT,  // softmax weight exp(logit - lse)
  kLogit = VEGAS_SCORE_LOGIT,    // the stored logit scale * q.k
};

struct SelectionOptions {
  float ratio = 0.07f;        // budget share of the candidates, in [0, 1]
  int32_t min_tokens = 256;   // budget floor (capped at n), >= 0
  float window_share = 0.5f;  // share of the budget kept for the most recent candidates, [0, 1]
  int32_t sink = 16;          // streaming: leading "attention sink" tokens, >= 0
  float p = 0.9f;             // topp: attention mass to cover, in (0, 1]
  ScoreKind score_kind = ScoreKind::kWeight;
  int32_t quest_page_size = 16;  // quest: tokens per scored page, >= 1
  // policy "user": the caller's vtable (copied by the policy); ignored otherwise.
  const vegas_select_policy *user = nullptr;
};

// Throws vegas::Error(INVALID_ARGUMENT) naming the first field out of range
// (NaN included).
void validate_selection_options(const SelectionOptions &options);

// k = clamp(ceil(ratio * n), min_tokens, n), so n < min_tokens keeps all n.
// ratio * n is formed in double and a product within a relative 1e-6 above an
// integer counts as that integer: the float 0.07f is a little above 0.07, and
// without this 0.07f * 1000 would give 71 instead of 70.
int32_t selection_budget(int32_t n, float ratio, int32_t min_tokens);

// How many of a budget of k go to the most recent candidates:
// round(window_share * k) (halves away from zero), at most k.
int32_t window_count(int32_t k, float window_share);

}  // namespace vegas
