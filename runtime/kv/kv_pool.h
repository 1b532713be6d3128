// Page bookkeeping of the paged KV cache (DESIGN §4). The backend owns the
// K/V storage ([num_pages][page_size][n_kv_heads][head_dim] per layer); this
// class only hands out page numbers and keeps each sequence's page table.
//
// With the prefix cache on, full pages whose K/V are final are published with
// the tokens they hold (PrefixIndex); a new sequence starts from the pages of
// its longest published prefix (attach_prefix) and prefills only the rest. A
// page is counted once per page table holding it; one no table holds stays
// cached (evictable, least recently released first) while it is published,
// and is taken back when reserve finds no free page. Tables share only full
// pages below every holder's write position, so no page is written while
// shared (no copy on write is needed).
#pragma once

#include <cstdint>
#include <list>
#include <vector>

#include "kv/prefix_index.h"

namespace vegas {

class KvPool {
 public:
  KvPool(int32_t num_pages, int32_t page_size, bool prefix_cache = false);

  int32_t page_size() const { return page_size_; }
  int32_t num_pages() const { return num_pages_; }
  // Pages a reserve can take: free ones and cached ones no table holds.
  int32_t free_pages() const { return static_cast<int32_t>(free_.size() + evictable_.size()); }

  // Grows `table` so that it covers `n_tokens` token slots. Throws
  // vegas::Error(VEGAS_ERR_KV_FULL) and leaves `table` unchanged if the pool
  // has too few free pages.
  void reserve(std::vector<int32_t> &table, int64_t n_tokens);
  // Shrinks `table` to the pages needed for `n_tokens` slots, letting go of the rest.
  void truncate(std::vector<int32_t> &table, int64_t n_tokens);
  // Lets go of every page of `table` and clears it.
  void release(std::vector<int32_t> &table);

  // Pages needed for n tokens.
  int64_t pages_for(int64_t n_tokens) const { return (n_tokens + page_size_ - 1) / page_size_; }

  // Where a table's publishing got to: its first `pages` pages are published,
  // the last of them as entry `parent`.
  struct PublishCursor {
    int32_t pages = 0;
    uint64_t parent = PrefixIndex::kRoot;
  };
  // Fills the empty `table` with the pages of the longest published prefix of
  // tokens[0, max_tokens) (whole pages) and returns the tokens they cover
  // (0 with the cache off); `cursor` then points past them.
  int64_t attach_prefix(std::vector<int32_t> &table, const int32_t *tokens, int64_t max_tokens,
                        PublishCursor *cursor);
  // Publishes the full pages of `table` below n_final tokens (their K/V
  // written and final) that `cursor` has not published yet. A page whose
  // tokens another page holds already stays unpublished.
  void publish(const std::vector<int32_t> &table, const int32_t *tokens, int64_t n_final,
               PublishCursor *cursor);

  // Prefix cache counters since the pool was made.
  int64_t hit_tokens() const { return hit_tokens_; }
  int64_t evicted_pages() const { return evicted_pages_; }

 private:
  void let_go(int32_t page);
  int32_t take_page();
  void check_page(int32_t page) const;

  int32_t num_pages_;
  int32_t page_size_;
  bool prefix_cache_;
  std::vector<int32_t> free_;     // stack of free page numbers
  std::vector<int32_t> holders_;  // [page]: page tables holding it
  std::list<int32_t> evictable_;  // published pages no table holds, oldest first
  std::vector<std::list<int32_t>::iterator> evictable_at_;  // [page], valid while listed
  std::vector<uint8_t> listed_;                             // [page]: in evictable_
  PrefixIndex index_;
  int64_t hit_tokens_ = 0;
  int64_t evicted_pages_ = 0;
};

}  // namespace vegas
