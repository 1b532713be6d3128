// Quest (Tang et al. 2024): per page of keys the element-wise min and max per
// KV head; a page's score for a query q is the upper bound of q.k over the page,
// sum_i max(q_i * max_i, q_i * min_i), summed over head dims and query heads
// (each query head reads the bounds of its KV head in the GQA group).
#pragma once

#include <cstdint>

#include "select/select_policy.h"

namespace vegas {

// Key bounds of quest pages [first_page, end_page) of one layer, from the paged
// K cache laid out [num_kv_pages][kv_page_size][n_kv_heads][head_dim] (DESIGN
// §4) with the sequence's page table. Quest page i covers positions
// [i * quest_page_size, min(n, (i + 1) * quest_page_size)), independent of the
// KV page size. Writes key_min/key_max[i][kv_head][d] for those pages. Call it
// for the pages whose tokens changed (the last one or two after a round).
struct PagedKeys {
  const float *k_cache = nullptr;
  const int32_t *page_table = nullptr;  // covers positions [0, n)
  int32_t kv_page_size = 16;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
};
void compute_key_bounds(const PagedKeys &keys, int32_t n, int32_t quest_page_size,
                        int32_t first_page, int32_t end_page, float *key_min, float *key_max);

// One page's score from its bounds key_min/key_max [n_kv_heads][head_dim]:
// sum over query heads h and dims d of max(q_hd * max_d, q_hd * min_d), query
// head h reading KV head h / (n_heads / n_kv_heads). Accumulated in float,
// heads outer, dims inner.
float quest_page_score(const float *query, const float *key_min, const float *key_max,
                       int32_t n_heads, int32_t n_kv_heads, int32_t head_dim);

// out[page] for pages [0, n_pages).
void quest_page_scores(const float *query, const PageBoundsView &bounds, int32_t n_pages,
                       int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float *out);

// The best pages by score (ties: later page first; NaN last) taken in rank
// order while their tokens fit in k; the first page that does not fit ends it.
// Writes the positions of the chosen pages ascending to out, returns the count.
// `scratch` holds ceil(n / page_size) ints.
int32_t select_quest_pages(const float *page_scores, int32_t n, int32_t page_size, int32_t k,
                           int32_t *scratch, int32_t *out);

}  // namespace vegas
