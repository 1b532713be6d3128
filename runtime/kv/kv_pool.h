// Page bookkeeping of the paged KV cache (DESIGN §4). The backend owns the
// K/V storage ([num_pages][page_size][n_kv_heads][head_dim] per layer); this
// class only hands out page numbers and keeps each sequence's page table.
#pragma once

#include <cstdint>
#include <vector>

namespace vegas {

class KvPool {
 public:
  KvPool(int32_t num_pages, int32_t page_size);

  int32_t page_size() const { return page_size_; }
  int32_t num_pages() const { return num_pages_; }
  int32_t free_pages() const { return static_cast<int32_t>(free_.size()); }

  // Grows `table` so that it covers `n_tokens` token slots. Throws
  // vegas::Error(VEGAS_ERR_KV_FULL) and leaves `table` unchanged if the pool
  // has too few free pages.
  void reserve(std::vector<int32_t> &table, int64_t n_tokens);
  // Shrinks `table` to the pages needed for `n_tokens` slots, freeing the rest.
  void truncate(std::vector<int32_t> &table, int64_t n_tokens);
  // Frees every page of `table` and clears it.
  void release(std::vector<int32_t> &table);

  // Pages needed for n tokens.
  int64_t pages_for(int64_t n_tokens) const { return (n_tokens + page_size_ - 1) / page_size_; }

 private:
  int32_t num_pages_;
  int32_t page_size_;
  std::vector<int32_t> free_;  // stack of free page numbers
};

}  // namespace vegas
