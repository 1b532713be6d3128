#include "select/select_options.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace vegas {

namespace {

void check_unit_interval(float value, const char *field, bool allow_zero) {
  const bool ok = allow_zero ? (value >= 0.0f && value <= 1.0f) : (value > 0.0f && value <= 1.0f);
  if (!ok)  // also catches NaN: every comparison with NaN is false
    fail(VEGAS_ERR_INVALID_ARGUMENT, std::string("selection option ") + field + " is " +
                                         std::to_string(value) + ", outside " +
                                         (allow_zero ? "[0, 1]" : "(0, 1]"));
}

void check_non_negative(int32_t value, const char *field, int32_t minimum) {
  if (value < minimum)
    fail(VEGAS_ERR_INVALID_ARGUMENT, std::string("selection option ") + field + " is " +
                                         std::to_string(value) +
                                         ", must be >= " + std::to_string(minimum));
}

}  // namespace

void validate_selection_options(const SelectionOptions &options) {
  check_unit_interval(options.ratio, "ratio", true);
  check_non_negative(options.min_tokens, "min_tokens", 0);
  check_unit_interval(options.window_share, "window_share", true);
  check_non_negative(options.sink, "sink", 0);
  check_unit_interval(options.p, "p", false);
  check_non_negative(options.quest_page_size, "quest_page_size", 1);
  if (options.score_kind != ScoreKind::kWeight && options.score_kind != ScoreKind::kLogit)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "selection option score_kind is " +
                                         std::to_string(static_cast<int32_t>(options.score_kind)) +
                                         ", not VEGAS_SCORE_WEIGHT (0) or VEGAS_SCORE_LOGIT (1)");
}

int32_t selection_budget(int32_t n, float ratio, int32_t min_tokens) {
  if (n <= 0) return 0;
  const double product = static_cast<double>(ratio) * n;
  const double k = std::ceil(product - product * 1e-6);
  // Not std::clamp: min_tokens may exceed n, and then n wins.
  const int64_t floored = std::max<int64_t>(static_cast<int64_t>(k), min_tokens);
  return static_cast<int32_t>(std::min<int64_t>(floored, n));
}

int32_t window_count(int32_t k, float window_share) {
  const long w = std::lround(static_cast<double>(window_share) * k);
  return static_cast<int32_t>(std::clamp<long>(w, 0, k));
}

}  // namespace vegas
