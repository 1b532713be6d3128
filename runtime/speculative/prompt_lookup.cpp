#include "speculative/prompt_lookup.h"

#include <algorithm>

namespace vegas {

std::vector<int32_t> prompt_lookup(const int32_t *context, size_t size_in, int32_t max_drafts,
                                   const PromptLookupParams &params) {
  const int64_t size = static_cast<int64_t>(size_in);
  if (max_drafts <= 0) return {};
  for (int64_t n = params.max_ngram; n >= std::max(params.min_ngram, 1); --n) {
    if (size <= n) continue;
    const int32_t *suffix = context + size - n;
    // Latest first: the occurrence [start, start + n) ends before the suffix.
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (!std::equal(context + start, context + start + n, suffix)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(max_drafts, size - from);
      return std::vector<int32_t>(context + from, context + from + count);
    }
  }
  return {};
}

}  // namespace vegas
