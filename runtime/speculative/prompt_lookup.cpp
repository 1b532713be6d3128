#include "speculative/prompt_lookup.h"

#include <algorithm>

namespace vegas {

namespace {

// The latest `limit` starts of earlier occurrences of the last n tokens.
std::vector<int64_t> occurrences(const int32_t *context, int64_t size, int64_t n, int32_t limit) {
  std::vector<int64_t> starts;
  const int32_t *suffix = context + size - n;
  for (int64_t start = size - n - 1; start >= 0 && static_cast<int32_t>(starts.size()) < limit;
       --start)
    if (std::equal(context + start, context + start + n, suffix)) starts.push_back(start);
  return starts;
}

}  // namespace

std::vector<int32_t> prompt_lookup(const int32_t *context, size_t size_in, int32_t max_drafts,
                                   const PromptLookupParams &params) {
  const int64_t size = static_cast<int64_t>(size_in);
  if (max_drafts <= 0) return {};
  for (int64_t n = params.max_ngram; n >= std::max(params.min_ngram, 1); --n) {
    if (size <= n) continue;
    std::vector<int64_t> alive = occurrences(context, size, n, std::max(params.max_votes, 1));
    if (alive.empty()) continue;
    // Token by token: the next token of most occurrences still agreeing
    // (alive is latest first, so the first of equal counts is the latest).
    std::vector<int32_t> drafts;
    for (int64_t j = 0; j < max_drafts; ++j) {
      int32_t best = -1;
      int64_t best_votes = 0;
      for (const int64_t start : alive) {
        const int64_t at = start + n + j;
        if (at >= size) continue;
        const int32_t token = context[at];
        int64_t votes = 0;
        for (const int64_t other : alive)
          votes += other + n + j < size && context[other + n + j] == token;
        if (votes > best_votes) {
          best = token;
          best_votes = votes;
        }
      }
      if (best_votes == 0) break;
      drafts.push_back(best);
      alive.erase(std::remove_if(alive.begin(), alive.end(),
                                 [&](int64_t start) {
                                   return start + n + j >= size || context[start + n + j] != best;
                                 }),
                  alive.end());
    }
    return drafts;
  }
  return {};
}

std::string lookup_hybrid_base(const std::string &policy) {
  static const std::string kSuffix = "+lookup";
  if (policy.size() <= kSuffix.size() ||
      policy.compare(policy.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return {};
  return policy.substr(0, policy.size() - kSuffix.size());
}

}  // namespace vegas
