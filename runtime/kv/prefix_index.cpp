#include "kv/prefix_index.h"

#include <algorithm>

namespace vegas {

PrefixIndex::PrefixIndex(int32_t num_pages, int32_t page_size)
    : page_size_(page_size), entry_of_page_(static_cast<size_t>(num_pages), 0) {}

uint64_t PrefixIndex::key(uint64_t parent, const int32_t *tokens) const {
  // FNV-1a over the parent id and the tokens: only a bucket key, matches are exact.
  uint64_t h = 1469598103934665603ull ^ parent;
  h *= 1099511628211ull;
  for (int32_t i = 0; i < page_size_; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t PrefixIndex::find(uint64_t parent, const int32_t *tokens) const {
  const auto range = lookup_.equal_range(key(parent, tokens));
  for (auto it = range.first; it != range.second; ++it) {
    const Entry &e = entries_.at(it->second);
    if (e.parent == parent && std::equal(e.tokens.begin(), e.tokens.end(), tokens))
      return it->second;
  }
  return 0;
}

int32_t PrefixIndex::page_of(uint64_t id) const {
  return entries_.at(id).page;
}

uint64_t PrefixIndex::insert(uint64_t parent, const int32_t *tokens, int32_t page) {
  const uint64_t id = next_id_++;
  entries_.emplace(id, Entry{parent, page, std::vector<int32_t>(tokens, tokens + page_size_)});
  lookup_.emplace(key(parent, tokens), id);
  entry_of_page_[static_cast<size_t>(page)] = id;
  return id;
}

void PrefixIndex::erase_page(int32_t page) {
  uint64_t &slot = entry_of_page_[static_cast<size_t>(page)];
  if (slot == 0) return;
  const auto it = entries_.find(slot);
  const auto range = lookup_.equal_range(key(it->second.parent, it->second.tokens.data()));
  for (auto l = range.first; l != range.second; ++l)
    if (l->second == slot) {
      lookup_.erase(l);
      break;
    }
  entries_.erase(it);
  slot = 0;
}

}  // namespace vegas
