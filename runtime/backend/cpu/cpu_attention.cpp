#include "backend/cpu/cpu_attention.h"
#include "common/target_clones.h"
#include "common/worker_pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace vegas {
namespace {

// The keys a row attends to, in order: the selected positions of a sparse
// row (all below `range_start`), then every position in [range_start, end),
// then a tree row's listed positions (end is then the tree's base).
struct KeyList {
  const int32_t *selected = nullptr;
  int64_t n_selected = 0;
  int64_t range_start = 0;
  int64_t end = 0;  // position + 1, or the tree's base
  const int32_t *listed = nullptr;
  int64_t n_listed = 0;

  int64_t size() const { return n_selected + (end - range_start) + n_listed; }
};

KeyList key_list(const AttentionRow &row, int64_t layer) {
  KeyList keys;
  keys.end = int64_t{row.position} + 1;
  if (row.tree_keys != nullptr) {
    keys.end = row.tree_base;
    keys.listed = row.tree_keys;
    keys.n_listed = row.n_tree_keys;
  }
  if (row.sparse != nullptr) {
    keys.selected = row.sparse->positions + layer * row.sparse->stride;
    keys.n_selected = row.sparse->counts[layer];
    keys.range_start = row.sparse->prefix;
  }
  return keys;
}

// Calls fn(j, slot) for every key j of the list; the contiguous range is
// walked page by page (no division per key).
template <typename Fn>
inline void for_each_key(const KeyList &keys, const int32_t *page_table, int64_t ps, Fn &&fn) {
  for (int64_t j = 0; j < keys.n_selected; ++j) {
    const int64_t pos = keys.selected[j];
    fn(j, int64_t{page_table[pos / ps]} * ps + pos % ps);
  }
  int64_t j = keys.n_selected;
  for (int64_t p0 = keys.range_start; p0 < keys.end;) {
    const int64_t offset = p0 % ps;
    const int64_t base = int64_t{page_table[p0 / ps]} * ps;
    const int64_t count = std::min(ps - offset, keys.end - p0);
    for (int64_t o = 0; o < count; ++o) fn(j++, base + offset + o);
    p0 += count;
  }
  for (int64_t l = 0; l < keys.n_listed; ++l) {
    const int64_t pos = keys.listed[l];
    fn(j++, int64_t{page_table[pos / ps]} * ps + pos % ps);
  }
}

// One (row, KV head) pair: the query heads of the group share each K/V row
// load. `scores` holds group * keys.size() floats.
VEGAS_TARGET_CLONES void attend_group(const float *q, const AttentionRow &row, int64_t layer,
                                      const float *k_cache, const float *v_cache,
                                      const AttentionShape &shape, int64_t kv_head, float *scores,
                                      float *out) {
  const int64_t group = shape.n_heads / shape.n_kv_heads;
  const int64_t d = shape.head_dim;
  const int64_t slot_stride = shape.n_kv_heads * d;
  const KeyList keys = key_list(row, layer);
  const int64_t n_keys = keys.size();

  for_each_key(keys, row.page_table, shape.page_size, [&](int64_t j, int64_t slot) {
    const float *kr = k_cache + slot * slot_stride + kv_head * d;
    for (int64_t g = 0; g < group; ++g) {
      const float *qh = q + g * d;
      float dot = 0.f;
#pragma omp simd reduction(+ : dot)
      for (int64_t i = 0; i < d; ++i) dot += qh[i] * kr[i];
      scores[g * n_keys + j] = dot * shape.scale;
    }
  });

  const ScoreCapture *cap = row.capture;
  for (int64_t g = 0; g < group; ++g) {
    float *s = scores + g * n_keys;
    const int64_t head = kv_head * group + g;
    const int64_t cap_at =
        cap == nullptr ? 0 : (layer * cap->n_rows + row.capture_index) * shape.n_heads + head;
    // A captured row is a full-attention row: candidates [0, n) are its first keys.
    if (cap != nullptr) {
      std::memcpy(cap->logits + cap_at * cap->n_candidates, s,
                  sizeof(float) * static_cast<size_t>(cap->n_candidates));
    }
    float mx = s[0];
    for (int64_t t = 1; t < n_keys; ++t) mx = std::max(mx, s[t]);
    float sum = 0.f;
    for (int64_t t = 0; t < n_keys; ++t) {
      s[t] = std::exp(s[t] - mx);
      sum += s[t];
    }
    if (cap != nullptr) cap->lse[cap_at] = mx + std::log(sum);
    const float inv = 1.f / sum;
    for (int64_t t = 0; t < n_keys; ++t) s[t] *= inv;
    std::memset(out + g * d, 0, sizeof(float) * static_cast<size_t>(d));
  }

  for_each_key(keys, row.page_table, shape.page_size, [&](int64_t j, int64_t slot) {
    const float *vr = v_cache + slot * slot_stride + kv_head * d;
    for (int64_t g = 0; g < group; ++g) {
      const float p = scores[g * n_keys + j];
      float *oh = out + g * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) oh[i] += p * vr[i];
    }
  });
}

}  // namespace

void cpu_paged_attention(const float *q, const std::vector<AttentionRow> &rows, int64_t layer,
                         const float *k_cache, const float *v_cache, const AttentionShape &shape,
                         float *out, std::vector<float> &scratch, int n_threads) {
  const int64_t group = shape.n_heads / shape.n_kv_heads;
  int64_t max_keys = 0;
  for (const AttentionRow &r : rows) max_keys = std::max(max_keys, key_list(r, layer).size());
  const int64_t per_thread = group * max_keys;
  const size_t needed = static_cast<size_t>(per_thread * n_threads);
  if (scratch.size() < needed) scratch.resize(needed);

  const int64_t n_rows = static_cast<int64_t>(rows.size());
  const int64_t items = n_rows * shape.n_kv_heads;
  const int64_t row_stride = shape.n_heads * shape.head_dim;
  // Rows differ in length (causal prefill), hence dynamic scheduling.
  parallel_ranges(items, n_threads, 1, [&](int64_t begin, int64_t end, int thread) {
    float *scores = scratch.data() + thread * per_thread;
    for (int64_t it = begin; it < end; ++it) {
      const int64_t r = it / shape.n_kv_heads;
      const int64_t h = it % shape.n_kv_heads;
      const int64_t first = r * row_stride + h * group * shape.head_dim;
      attend_group(q + first, rows[static_cast<size_t>(r)], layer, k_cache, v_cache, shape, h,
                   scores, out + first);
    }
  });
}

}  // namespace vegas
