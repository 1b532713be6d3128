#include "backend/cpu/cpu_quest.h"

#include <algorithm>
#include <new>
#include <string>

#include "common/error.h"
#include "common/worker_pool.h"
#include "select/quest_pages.h"

namespace vegas {

namespace {

// Keys of one sequence's pages as select/quest_pages.h reads them.
PagedKeys paged_keys(const float *k_cache, const int32_t *page_table, const QuestShape &shape) {
  PagedKeys keys;
  keys.k_cache = k_cache;
  keys.page_table = page_table;
  keys.kv_page_size = shape.page_size;
  keys.n_kv_heads = shape.n_kv_heads;
  keys.head_dim = shape.head_dim;
  return keys;
}

}  // namespace

void CpuKeyBounds::allocate(const QuestShape &shape, int32_t num_pages) {
  shape_ = shape;
  num_pages_ = num_pages;
  const int64_t n = int64_t{shape.n_layers} * num_pages * shape.kv_dim();
  try {
    min_.assign(static_cast<size_t>(n), 0.0f);
    max_.assign(static_cast<size_t>(n), 0.0f);
  } catch (const std::bad_alloc &) {
    fail(VEGAS_ERR_OUT_OF_MEMORY, "CPU context: cannot allocate " + std::to_string(n * 8) +
                                      " bytes for the quest key bounds");
  }
}

void CpuKeyBounds::update(int layer, const float *k_cache, const std::vector<int32_t> &pages,
                          int n_threads) {
  const int64_t n = static_cast<int64_t>(pages.size());
  // One page: its own table entry, all page_size slots (a page only serves as
  // a full candidate page once every slot is written, and the write of the
  // last one re-bounds it).
  parallel_ranges(n, n > 8 ? n_threads : 1, 0, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const int32_t page = pages[static_cast<size_t>(i)];
      compute_key_bounds(paged_keys(k_cache, &page, shape_), shape_.page_size, shape_.page_size, 0,
                         1, min_.data() + at(layer, page), max_.data() + at(layer, page));
    }
  });
}

void CpuQuestRows::prepare(const ForwardBatch &batch, const QuestShape &shape) {
  shape_ = shape;
  n_rows_ = 0;
  int64_t row = 0;
  for (const SeqRows &s : batch.seqs) {
    if (s.quest != nullptr) {
      if (rows_.size() <= n_rows_) rows_.emplace_back();
      Row &r = rows_[n_rows_++];
      r.row = row;
      r.page_table = s.page_table;
      r.quest = *s.quest;
      const int32_t n = r.quest.prefix;
      const int32_t stride = std::max(1, std::min(r.quest.budget, n));
      const int32_t n_pages = (n + shape.page_size - 1) / shape.page_size;
      r.positions.resize(static_cast<size_t>(shape.n_layers) * static_cast<size_t>(stride));
      r.counts.assign(static_cast<size_t>(shape.n_layers), 0);
      r.scores.resize(static_cast<size_t>(std::max(n_pages, 1)));
      r.order.resize(r.scores.size());
      r.partial_min.resize(static_cast<size_t>(shape.kv_dim()));
      r.partial_max.resize(static_cast<size_t>(shape.kv_dim()));
      r.sparse.prefix = n;
      r.sparse.positions = r.positions.data();
      r.sparse.counts = r.counts.data();
      r.sparse.stride = stride;
    }
    row += s.n_tokens;
  }
}

void CpuQuestRows::attach(std::vector<AttentionRow> &rows) {
  for (size_t i = 0; i < n_rows_; ++i)
    rows[static_cast<size_t>(rows_[i].row)].sparse = &rows_[i].sparse;
}

void CpuQuestRows::select_row(Row &r, int layer, const float *q, const float *k_cache,
                              const CpuKeyBounds &bounds) const {
  const int32_t n = r.quest.prefix, ps = shape_.page_size;
  const int32_t full = n / ps, n_pages = (n + ps - 1) / ps;
  const float *query = q + r.row * shape_.n_heads * shape_.head_dim;
  for (int32_t page = 0; page < full; ++page) {
    const int32_t slot_page = r.page_table[page];
    r.scores[static_cast<size_t>(page)] =
        quest_page_score(query, bounds.min(layer, slot_page), bounds.max(layer, slot_page),
                         shape_.n_heads, shape_.n_kv_heads, shape_.head_dim);
  }
  if (full < n_pages) {  // the partial last page: only its positions below prefix
    compute_key_bounds(paged_keys(k_cache, r.page_table + full, shape_), n - full * ps, ps, 0, 1,
                       r.partial_min.data(), r.partial_max.data());
    r.scores[static_cast<size_t>(full)] =
        quest_page_score(query, r.partial_min.data(), r.partial_max.data(), shape_.n_heads,
                         shape_.n_kv_heads, shape_.head_dim);
  }
  int32_t *out = r.positions.data() + static_cast<int64_t>(layer) * r.sparse.stride;
  r.counts[static_cast<size_t>(layer)] =
      n == 0 ? 0 : select_quest_pages(r.scores.data(), n, ps, r.quest.budget, r.order.data(), out);
}

void CpuQuestRows::select_layer(int layer, const float *q, const float *k_cache,
                                const CpuKeyBounds &bounds, int n_threads) {
  const int64_t n = static_cast<int64_t>(n_rows_);
  parallel_ranges(n, n_threads, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i)
      select_row(rows_[static_cast<size_t>(i)], layer, q, k_cache, bounds);
  });
}

}  // namespace vegas
