// Quest drafting on the CPU backend (backend.h: QuestDraft,
// ContextParams::key_bounds): the key bounds of every KV page per layer, kept
// current as forward passes write K, and the per-layer page selection of each
// quest row, which the attention then reads as an ordinary sparse set.
//
// Cost: a forward pass re-bounds each page it writes, per layer (a page's
// keys read once more: page_size * kv_dim floats); a quest row scores its full
// pages from the cached bounds (2 * kv_dim floats per page, 1/8 of its keys at
// page size 16), bounds its partial last page from its keys, and sorts the
// page scores (select_quest_pages).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_attention.h"

namespace vegas {

struct QuestShape {
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 0;  // the KV page size: quest pages are KV pages
  int64_t kv_dim() const { return int64_t{n_kv_heads} * head_dim; }
};

// Element-wise min/max of the keys of every KV page, per layer:
// [n_layers][num_pages][n_kv_heads][head_dim] each.
class CpuKeyBounds {
 public:
  // Throws OUT_OF_MEMORY when the bounds cannot be allocated.
  void allocate(const QuestShape &shape, int32_t num_pages);
  bool enabled() const { return !min_.empty(); }
  // Re-bounds `pages` of `layer` over every slot of each page, from that
  // layer's K cache [slots][n_kv_heads][head_dim].
  void update(int layer, const float *k_cache, const std::vector<int32_t> &pages, int n_threads);
  const float *min(int layer, int32_t page) const { return min_.data() + at(layer, page); }
  const float *max(int layer, int32_t page) const { return max_.data() + at(layer, page); }

 private:
  int64_t at(int layer, int32_t page) const {
    return (int64_t{layer} * num_pages_ + page) * shape_.kv_dim();
  }
  QuestShape shape_;
  int32_t num_pages_ = 0;
  std::vector<float> min_, max_;
};

// The quest rows of one forward pass and the set each one attends to.
class CpuQuestRows {
 public:
  // Takes the batch's rows with SeqRows::quest (a quest sequence has one row)
  // and sizes their scratch; no allocation happens in select_layer.
  void prepare(const ForwardBatch &batch, const QuestShape &shape);
  bool empty() const { return n_rows_ == 0; }
  // Points each quest row's AttentionRow at its set (call after prepare).
  void attach(std::vector<AttentionRow> &rows);
  // Chooses every quest row's set of `layer` from its query in q
  // ([rows][n_heads][head_dim], after RoPE), the cached bounds of its full
  // pages and the keys of its partial last page (this layer's K cache).
  void select_layer(int layer, const float *q, const float *k_cache, const CpuKeyBounds &bounds,
                    int n_threads);
  // The set of the i-th quest row (batch order) as the attention reads it.
  size_t size() const { return n_rows_; }
  const SparseAttention &set(size_t i) const { return rows_[i].sparse; }

 private:
  struct Row {
    int64_t row = 0;  // index in the batch
    const int32_t *page_table = nullptr;
    QuestDraft quest;
    SparseAttention sparse;
    std::vector<int32_t> positions, counts;  // [n_layers][stride], [n_layers]
    std::vector<float> scores, partial_min, partial_max;
    std::vector<int32_t> order;
  };
  void select_row(Row &r, int layer, const float *q, const float *k_cache,
                  const CpuKeyBounds &bounds) const;

  QuestShape shape_;
  std::vector<Row> rows_;  // grown, never shrunk: the scratch is reused
  size_t n_rows_ = 0;
};

}  // namespace vegas
