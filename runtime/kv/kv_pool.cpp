#include "kv/kv_pool.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "common/error.h"

namespace vegas {

KvPool::KvPool(int32_t num_pages, int32_t page_size, bool prefix_cache)
    : num_pages_(num_pages),
      page_size_(page_size),
      prefix_cache_(prefix_cache),
      index_(num_pages < 0 ? 0 : num_pages, page_size) {
  if (num_pages < 0) {
    fail(VEGAS_ERR_INVALID_ARGUMENT, "KV pool: num_pages " + std::to_string(num_pages) + " < 0");
  }
  if (page_size <= 0) {
    fail(VEGAS_ERR_INVALID_ARGUMENT, "KV pool: page_size " + std::to_string(page_size) + " <= 0");
  }
  // Pushed in reverse so that a fresh pool hands out pages 0, 1, 2, ...
  free_.reserve(static_cast<size_t>(num_pages));
  for (int32_t p = num_pages - 1; p >= 0; --p) free_.push_back(p);
  holders_.assign(static_cast<size_t>(num_pages), 0);
  evictable_at_.resize(static_cast<size_t>(num_pages));
  listed_.assign(static_cast<size_t>(num_pages), 0);
}

void KvPool::check_page(int32_t page) const {
  if (page < 0 || page >= num_pages_) {
    fail(VEGAS_ERR_INVALID_ARGUMENT, "KV pool: page table holds page " + std::to_string(page) +
                                         ", pool has " + std::to_string(num_pages_));
  }
}

int32_t KvPool::take_page() {
  int32_t page;
  if (!free_.empty()) {
    page = free_.back();
    free_.pop_back();
  } else {  // the least recently released cached page
    page = evictable_.front();
    evictable_.pop_front();
    listed_[static_cast<size_t>(page)] = 0;
    index_.erase_page(page);
    ++evicted_pages_;
  }
  holders_[static_cast<size_t>(page)] = 1;
  return page;
}

void KvPool::let_go(int32_t page) {
  const size_t p = static_cast<size_t>(page);
  if (--holders_[p] > 0) return;
  if (index_.holds(page)) {
    evictable_.push_back(page);
    evictable_at_[p] = std::prev(evictable_.end());
    listed_[p] = 1;
  } else {
    free_.push_back(page);
  }
}

void KvPool::reserve(std::vector<int32_t> &table, int64_t n_tokens) {
  if (n_tokens < 0) {
    fail(VEGAS_ERR_INVALID_ARGUMENT, "KV pool: reserve of " + std::to_string(n_tokens) + " tokens");
  }
  const int64_t needed = pages_for(n_tokens);
  const int64_t have = static_cast<int64_t>(table.size());
  if (needed <= have) return;
  const int64_t missing = needed - have;
  if (missing > free_pages()) {
    fail(VEGAS_ERR_KV_FULL, "KV pool full: " + std::to_string(n_tokens) + " tokens need " +
                                std::to_string(missing) + " more pages of " +
                                std::to_string(page_size_) + " tokens, " +
                                std::to_string(free_pages()) + " of " + std::to_string(num_pages_) +
                                " pages are free");
  }
  // Grow the table's storage first: if that throws, neither the table nor the
  // free stack has changed.
  table.reserve(static_cast<size_t>(needed));
  for (int64_t i = 0; i < missing; ++i) table.push_back(take_page());
}

void KvPool::truncate(std::vector<int32_t> &table, int64_t n_tokens) {
  if (n_tokens < 0) {
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "KV pool: truncate to " + std::to_string(n_tokens) + " tokens");
  }
  const size_t keep = static_cast<size_t>(pages_for(n_tokens));
  if (keep >= table.size()) return;
  for (size_t i = keep; i < table.size(); ++i) check_page(table[i]);
  // The last page first: a free page is reused in table order by the next
  // reserve, and of cached pages the deepest goes first (an evicted page's
  // successors can no longer be reached).
  for (size_t i = table.size(); i > keep; --i) let_go(table[i - 1]);
  table.resize(keep);
}

void KvPool::release(std::vector<int32_t> &table) {
  truncate(table, 0);
  table.clear();
}

int64_t KvPool::attach_prefix(std::vector<int32_t> &table, const int32_t *tokens,
                              int64_t max_tokens, PublishCursor *cursor) {
  *cursor = PublishCursor{};
  if (!prefix_cache_ || !table.empty()) return 0;
  const int64_t pages = max_tokens / page_size_;
  uint64_t parent = PrefixIndex::kRoot;
  for (int64_t i = 0; i < pages; ++i) {
    const uint64_t id = index_.find(parent, tokens + i * page_size_);
    if (id == 0) break;
    const int32_t page = index_.page_of(id);
    const size_t p = static_cast<size_t>(page);
    if (listed_[p]) {  // cached, held by no table: no longer evictable
      evictable_.erase(evictable_at_[p]);
      listed_[p] = 0;
    }
    ++holders_[p];
    table.push_back(page);
    parent = id;
  }
  cursor->pages = static_cast<int32_t>(table.size());
  cursor->parent = parent;
  const int64_t hit = static_cast<int64_t>(table.size()) * page_size_;
  hit_tokens_ += hit;
  return hit;
}

void KvPool::publish(const std::vector<int32_t> &table, const int32_t *tokens, int64_t n_final,
                     PublishCursor *cursor) {
  if (!prefix_cache_) return;
  const int64_t full = std::min<int64_t>(n_final / page_size_, static_cast<int64_t>(table.size()));
  for (int64_t i = cursor->pages; i < full; ++i) {
    const int32_t *page_tokens = tokens + i * page_size_;
    uint64_t id = index_.find(cursor->parent, page_tokens);
    const int32_t page = table[static_cast<size_t>(i)];
    // Tokens another page holds already: that entry continues the chain (the
    // K/V are the same), this page stays private.
    if (id == 0 && !index_.holds(page)) id = index_.insert(cursor->parent, page_tokens, page);
    if (id == 0) break;  // the page is published under another prefix: stop here
    cursor->parent = id;
    cursor->pages = static_cast<int32_t>(i + 1);
  }
}

}  // namespace vegas
