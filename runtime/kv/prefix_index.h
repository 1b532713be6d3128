// The prefix cache's index (issue: IDE completion latency): which KV page
// holds the keys and values of a given page of tokens after a given prefix.
// An entry is one full page: its tokens and its parent, the entry of the page
// before it (kRoot for a sequence's first page), so a chain of entries from
// the root spells out a whole prefix. Parents are entry ids, which are never
// reused, so a match is exact (no hash of the prefix stands in for it); an
// entry whose parent was evicted is unreachable and goes in its turn.
//
// Pure bookkeeping of page numbers: KvPool owns the pages, their reference
// counts and the eviction order, and is this index's one writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace vegas {

class PrefixIndex {
 public:
  static constexpr uint64_t kRoot = 0;

  PrefixIndex(int32_t num_pages, int32_t page_size);

  // The entry holding `tokens[0, page_size)` right after entry `parent`, or 0.
  uint64_t find(uint64_t parent, const int32_t *tokens) const;
  int32_t page_of(uint64_t id) const;
  // Records that `page` holds `tokens` after `parent` and returns the new
  // entry's id; `page` must not hold an entry already.
  uint64_t insert(uint64_t parent, const int32_t *tokens, int32_t page);
  // Forgets the entry `page` holds, if any.
  void erase_page(int32_t page);
  bool holds(int32_t page) const { return entry_of_page_[static_cast<size_t>(page)] != 0; }

 private:
  struct Entry {
    uint64_t parent;
    int32_t page;
    std::vector<int32_t> tokens;
  };
  uint64_t key(uint64_t parent, const int32_t *tokens) const;

  int32_t page_size_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Entry> entries_;         // by id
  std::unordered_multimap<uint64_t, uint64_t> lookup_;  // key(parent, tokens) -> id
  std::vector<uint64_t> entry_of_page_;                 // 0 = none
};

}  // namespace vegas
