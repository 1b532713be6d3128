// Quest drafting on the device (DESIGN §5 quest; the runtime's contract is
// backend.h: QuestDraft): per layer and KV page the element-wise min and max
// of its keys, and per layer of a draft step each quest sequence's pages
// ranked by the upper bound of q.k over them, the best that fit its budget
// written as the sparse record paged_attention / decode_attention read.
//
// quest_bounds re-bounds the listed KV pages over all their slots, every
// layer at once (one block per (page, layer)); the CUDA context runs it after
// each step for the pages the step wrote. A page serves as a full candidate
// page only once every slot is written, and the last write re-bounds it.
//
// quest_select runs per layer between rope_kv and the attention, two kernels:
//  1. scores, (sequence, 16 blocks) of 8 warps, one warp per page: sum over
//     the query heads h and dims d of max(q_hd * kmin_d, q_hd * kmax_d), q
//     (after RoPE) staged in shared memory as float, h reading the bounds of
//     its KV head; one set per layer shared by the KV heads, like the other
//     policies. The partial last page (prefix not a multiple of page_size) is
//     bounded from its keys below prefix on the spot. Scores become
//     radix_select.cuh keys in `keys`.
//  2. choice, one block per sequence: how many pages the budget takes (pages
//     in rank order while their tokens fit; only the last page can be short,
//     so that is floor(budget / page_size) plus the partial page when it ranks
//     within them and fits the rest), the radix select of that many, and their
//     positions, ascending, into the record {prefix, stride, counts[n_layers],
//     positions[n_layers][stride]} with stride = quest_record_stride.
// Ranking is select/top_k_select.h's (ties: later page; NaN last), so the
// choice equals select_quest_pages on the same scores. Fixed buffers only, no
// host sync: the step stays a replayable CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_utils.cuh"

namespace vegas::kernels {

// Positions per layer in a quest sequence's record: the most the budget keeps.
__host__ __device__ inline int32_t quest_record_stride(int32_t prefix, int32_t budget) {
  const int32_t most = budget < prefix ? budget : prefix;
  return most > 1 ? most : 1;
}

struct QuestBoundsParams {
  const bf16 *k_cache = nullptr;  // [n_layers][k_layer_stride], a layer [slots][kv_dim]
  int64_t k_layer_stride = 0;
  bf16 *key_min = nullptr;  // [n_layers][num_pages][kv_dim]
  bf16 *key_max = nullptr;
  int32_t num_pages = 0;
  // KV pages to re-bound, entries < 0 skipped; null = every page [0, num_pages).
  const int32_t *pages = nullptr;
  int32_t n_listed = 0;
  int32_t n_layers = 0;
  int32_t page_size = 0;
  int32_t kv_dim = 0;  // n_kv_heads * head_dim, even
  // fp8 caches (kv_fp8.cuh), null = bf16: k_cache holds e4m3 bytes at the
  // same element offsets and this the scales, [n_layers][k_scale_layer_stride]
  // (a layer's [slots][n_kv_heads] first).
  const float *k_scale = nullptr;
  int64_t k_scale_layer_stride = 0;
  int32_t head_dim = 0;
};

cudaError_t quest_bounds(const QuestBoundsParams &p, cudaStream_t stream);

struct QuestSelectParams {
  const bf16 *q = nullptr;         // [rows][n_heads][head_dim], after RoPE
  const bf16 *k_cache = nullptr;   // this layer: [slots][n_kv_heads][head_dim]
  const float *k_scale = nullptr;  // fp8 caches (as QuestBoundsParams): this layer's scales
  const bf16 *key_min = nullptr;   // this layer: [num_pages][n_kv_heads][head_dim]
  const bf16 *key_max = nullptr;
  const int32_t *page_table = nullptr;      // all sequences' tables, concatenated
  const int32_t *seq_page_off = nullptr;    // [n_seqs] first entry of s in page_table
  const int32_t *seq_row_start = nullptr;   // [n_seqs] the row of s's query
  const int32_t *seq_prefix = nullptr;      // [n_seqs] candidates [0, prefix); < 0: not quest
  const int32_t *seq_budget = nullptr;      // [n_seqs] tokens kept at most, >= 0
  const int32_t *seq_record_off = nullptr;  // [n_seqs] s's record at records + offset
  int32_t *records = nullptr;
  uint32_t *keys = nullptr;  // [n_seqs][key_stride] scratch
  int32_t key_stride = 0;    // >= ceil(prefix / page_size) of every quest sequence
  int32_t n_seqs = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;  // even
  int32_t page_size = 0;
  int32_t n_layers = 0;
  int32_t layer = 0;
};

// Whether the query of one row fits the score kernel's shared memory.
bool quest_select_supports(int32_t n_heads, int32_t head_dim);

cudaError_t quest_select(const QuestSelectParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
