// Causal GQA attention over the paged KV cache (DESIGN §4), f32, with the
// optional sparse key set of drafting and the score capture of verification
// (backend.h: SparseAttention, ScoreCapture).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace vegas {

// One query row: where its sequence's keys live and which it sees.
struct AttentionRow {
  const int32_t *page_table = nullptr;
  int32_t position = 0;                     // the row's own position; causal: keys up to it
  const SparseAttention *sparse = nullptr;  // null = every position in [0, position]
  // A token tree's row (TokenTree): the keys up to the tree's base, then these
  // positions (its ancestors' and its own slots, ascending) instead of
  // (base, position].
  const int32_t *tree_keys = nullptr;
  int32_t n_tree_keys = 0;
  int32_t tree_base = 0;
  const ScoreCapture *capture = nullptr;  // null = this row's scores are not captured
  int32_t capture_index = 0;              // the row's index in capture->rows
};

struct AttentionShape {
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int32_t page_size = 0;
  float scale = 0.f;  // applied to q.k before the softmax
};

// q: [rows][n_heads][head_dim]; k_cache, v_cache: [slots][n_kv_heads][head_dim]
// with slot = page_table[p / page_size] * page_size + p % page_size; out: like
// q. Query head h reads KV head h / (n_heads / n_kv_heads). The softmax is f32
// with max subtraction. `layer` picks the sparse set and the capture slice.
// `scratch` grows to n_threads * group * (longest key list).
void cpu_paged_attention(const float *q, const std::vector<AttentionRow> &rows, int64_t layer,
                         const float *k_cache, const float *v_cache, const AttentionShape &shape,
                         float *out, std::vector<float> &scratch, int n_threads);

}  // namespace vegas
