#include "speculative/prompt_lookup.h"

#include <algorithm>

#include "common/ends_with.h"

namespace vegas {

namespace {

// The latest `limit` starts of earlier occurrences of the last n tokens.
std::vector<int64_t> scan_occurrences(const int32_t *context, int64_t size, int64_t n,
                                      int32_t limit) {
  std::vector<int64_t> starts;
  const int32_t *suffix = context + size - n;
  for (int64_t start = size - n - 1; start >= 0 && static_cast<int32_t>(starts.size()) < limit;
       --start)
    if (std::equal(context + start, context + start + n, suffix)) starts.push_back(start);
  return starts;
}

// The drafts that the occurrences `alive` (starts of the suffix's n tokens,
// latest first) vote for, token by token: the next token of most occurrences
// still agreeing (the first of equal counts is the latest).
std::vector<int32_t> vote(const int32_t *context, int64_t size, int64_t n,
                          std::vector<int64_t> alive, int32_t max_drafts) {
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

// The hash of the n ids at `ids` (splitmix64's finalizer over a running mix).
uint64_t ngram_hash(const int32_t *ids, int64_t n) {
  uint64_t h = static_cast<uint64_t>(n);
  for (int64_t i = 0; i < n; ++i) {
    h = (h ^ static_cast<uint32_t>(ids[i])) * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 29;
  }
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

}  // namespace

std::vector<int32_t> prompt_lookup(const int32_t *context, size_t size_in, int32_t max_drafts,
                                   const PromptLookupParams &params) {
  const int64_t size = static_cast<int64_t>(size_in);
  if (max_drafts <= 0) return {};
  for (int64_t n = params.max_ngram; n >= std::max(params.min_ngram, 1); --n) {
    if (size <= n) continue;
    std::vector<int64_t> alive = scan_occurrences(context, size, n, std::max(params.max_votes, 1));
    if (!alive.empty()) return vote(context, size, n, std::move(alive), max_drafts);
  }
  return {};
}

void PromptLookupIndex::LatestStarts::reserve(size_t entries) {
  size_t slots = 16;
  while (slots < 2 * entries) slots *= 2;  // at most half full
  if (slots <= keys_.size()) return;
  std::vector<uint64_t> keys(slots, 0);
  std::vector<int32_t> starts(slots, -1);
  keys.swap(keys_);
  starts.swap(starts_);
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] != 0) {
      const size_t at = slot_of(keys[i]);
      keys_[at] = keys[i];
      starts_[at] = starts[i];
    }
}

size_t PromptLookupIndex::LatestStarts::slot_of(uint64_t key) const {
  const size_t mask = keys_.size() - 1;
  size_t at = static_cast<size_t>(key) & mask;  // the hash is mixed already
  while (keys_[at] != 0 && keys_[at] != key) at = (at + 1) & mask;
  return at;
}

int32_t PromptLookupIndex::LatestStarts::exchange(uint64_t hash, int32_t start) {
  if (2 * (used_ + 1) > keys_.size()) reserve(2 * (used_ + 1));
  const uint64_t key = key_of(hash);
  const size_t at = slot_of(key);
  if (keys_[at] == 0) {
    keys_[at] = key;
    ++used_;
  }
  const int32_t before = starts_[at];
  starts_[at] = start;
  return before;
}

int32_t PromptLookupIndex::LatestStarts::find(uint64_t hash) const {
  if (keys_.empty()) return -1;
  return starts_[slot_of(key_of(hash))];
}

PromptLookupIndex::PromptLookupIndex(const PromptLookupParams &params)
    : params_(params), chains_(static_cast<size_t>(std::max(params.max_ngram, 0))) {}

void PromptLookupIndex::extend(const int32_t *context, size_t size) {
  if (size < indexed_) *this = PromptLookupIndex(params_);
  if (indexed_ == 0)  // room for what it generates: a rehash in a round would stall it
    for (Chains &c : chains_) c.latest.reserve(size + size / 4 + 256);
  for (Chains &c : chains_) c.previous.resize(size, -1);
  for (size_t end = indexed_; end < size; ++end) {
    for (size_t n = 1; n <= chains_.size() && n <= end + 1; ++n) {
      const size_t start = end + 1 - n;
      Chains &c = chains_[n - 1];
      c.previous[start] = c.latest.exchange(ngram_hash(context + start, static_cast<int64_t>(n)),
                                            static_cast<int32_t>(start));
    }
  }
  indexed_ = size;
}

std::vector<int32_t> PromptLookupIndex::propose(const int32_t *context, size_t size_in,
                                                int32_t max_drafts) const {
  const int64_t size = static_cast<int64_t>(size_in);
  if (max_drafts <= 0 || size_in != indexed_) return {};
  const int32_t limit = std::max(params_.max_votes, 1);
  for (int64_t n = params_.max_ngram; n >= std::max(params_.min_ngram, 1); --n) {
    if (size <= n) continue;
    const Chains &c = chains_[static_cast<size_t>(n - 1)];
    const int32_t *suffix = context + size - n;
    std::vector<int64_t> alive;
    // The chain holds the suffix itself first, then its earlier occurrences
    // and any n-gram of the same hash (compared away).
    for (int64_t start = c.latest.find(ngram_hash(suffix, n));
         start >= 0 && static_cast<int32_t>(alive.size()) < limit;
         start = c.previous[static_cast<size_t>(start)])
      if (start < size - n && std::equal(context + start, context + start + n, suffix))
        alive.push_back(start);
    if (!alive.empty()) return vote(context, size, n, std::move(alive), max_drafts);
  }
  return {};
}

namespace {
std::string hybrid_base(const std::string &policy, const std::string &suffix) {
  if (policy.size() <= suffix.size() || !ends_with(policy, suffix)) return {};
  return policy.substr(0, policy.size() - suffix.size());
}
}  // namespace

std::string lookup_hybrid_base(const std::string &policy) {
  return hybrid_base(policy, "+lookup");
}

std::string model_hybrid_base(const std::string &policy) {
  return hybrid_base(policy, "+model");
}

std::string draft_selected_base(const std::string &policy) {
  return hybrid_base(policy, "@model");
}

}  // namespace vegas
