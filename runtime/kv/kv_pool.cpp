#include "kv/kv_pool.h"

#include <string>

#include "common/error.h"

namespace vegas {

KvPool::KvPool(int32_t num_pages, int32_t page_size)
    : num_pages_(num_pages), page_size_(page_size) {
  if (num_pages < 0) {
    fail(VEGAS_ERR_INVALID_ARGUMENT, "KV pool: num_pages " + std::to_string(num_pages) + " < 0");
  }
  if (page_size <= 0) {
    fail(VEGAS_ERR_INVALID_ARGUMENT, "KV pool: page_size " + std::to_string(page_size) + " <= 0");
  }
  // Pushed in reverse so that a fresh pool hands out pages 0, 1, 2, ...
  free_.reserve(static_cast<size_t>(num_pages));
  for (int32_t p = num_pages - 1; p >= 0; --p) free_.push_back(p);
}

void KvPool::reserve(std::vector<int32_t> &table, int64_t n_tokens) {
  if (n_tokens < 0) {
    fail(VEGAS_ERR_INVALID_ARGUMENT, "KV pool: reserve of " + std::to_string(n_tokens) + " tokens");
  }
  const int64_t needed = pages_for(n_tokens);
  const int64_t have = static_cast<int64_t>(table.size());
  if (needed <= have) return;
  const int64_t missing = needed - have;
  if (missing > static_cast<int64_t>(free_.size())) {
    fail(VEGAS_ERR_KV_FULL, "KV pool full: " + std::to_string(n_tokens) + " tokens need " +
                                std::to_string(missing) + " more pages of " +
                                std::to_string(page_size_) + " tokens, " +
                                std::to_string(free_.size()) + " of " + std::to_string(num_pages_) +
                                " pages are free");
  }
  // Grow the table's storage first: if that throws, neither the table nor the
  // free stack has changed.
  table.reserve(static_cast<size_t>(needed));
  for (int64_t i = 0; i < missing; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
}

void KvPool::truncate(std::vector<int32_t> &table, int64_t n_tokens) {
  if (n_tokens < 0) {
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "KV pool: truncate to " + std::to_string(n_tokens) + " tokens");
  }
  const size_t keep = static_cast<size_t>(pages_for(n_tokens));
  if (keep >= table.size()) return;
  for (size_t i = keep; i < table.size(); ++i) {
    const int32_t page = table[i];
    if (page < 0 || page >= num_pages_) {
      fail(VEGAS_ERR_INVALID_ARGUMENT, "KV pool: page table holds page " + std::to_string(page) +
                                           ", pool has " + std::to_string(num_pages_));
    }
  }
  // Freed last page first, so the next reserve reuses the pages in table order.
  for (size_t i = table.size(); i > keep; --i) free_.push_back(table[i - 1]);
  table.resize(keep);
}

void KvPool::release(std::vector<int32_t> &table) {
  truncate(table, 0);
  table.clear();
}

}  // namespace vegas
