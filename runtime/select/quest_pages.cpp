#include "select/quest_pages.h"

#include <algorithm>
#include <limits>

#include "select/top_k_select.h"

namespace vegas {

void compute_key_bounds(const PagedKeys &keys, int32_t n, int32_t quest_page_size,
                        int32_t first_page, int32_t end_page, float *key_min, float *key_max) {
  const int64_t token_width = static_cast<int64_t>(keys.n_kv_heads) * keys.head_dim;
  for (int32_t page = first_page; page < end_page; ++page) {
    float *mn = key_min + page * token_width;
    float *mx = key_max + page * token_width;
    std::fill(mn, mn + token_width, std::numeric_limits<float>::infinity());
    std::fill(mx, mx + token_width, -std::numeric_limits<float>::infinity());
    const int64_t begin = static_cast<int64_t>(page) * quest_page_size;
    const int64_t end = std::min<int64_t>(n, begin + quest_page_size);
    for (int64_t pos = begin; pos < end; ++pos) {
      const int64_t slot =
          static_cast<int64_t>(keys.page_table[pos / keys.kv_page_size]) * keys.kv_page_size +
          pos % keys.kv_page_size;
      const float *k = keys.k_cache + slot * token_width;
      for (int64_t j = 0; j < token_width; ++j) {
        mn[j] = std::min(mn[j], k[j]);
        mx[j] = std::max(mx[j], k[j]);
      }
    }
  }
}

float quest_page_score(const float *query, const float *key_min, const float *key_max,
                       int32_t n_heads, int32_t n_kv_heads, int32_t head_dim) {
  const int32_t group = n_heads / n_kv_heads;
  float score = 0.0f;
  for (int32_t h = 0; h < n_heads; ++h) {
    const float *q = query + static_cast<int64_t>(h) * head_dim;
    const int64_t at = static_cast<int64_t>(h / group) * head_dim;
    const float *mn = key_min + at;
    const float *mx = key_max + at;
    for (int32_t d = 0; d < head_dim; ++d) score += std::max(q[d] * mx[d], q[d] * mn[d]);
  }
  return score;
}

void quest_page_scores(const float *query, const PageBoundsView &bounds, int32_t n_pages,
                       int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float *out) {
  const int64_t page_width = static_cast<int64_t>(n_kv_heads) * head_dim;
  for (int32_t page = 0; page < n_pages; ++page)
    out[page] = quest_page_score(query, bounds.key_min + page * page_width,
                                 bounds.key_max + page * page_width, n_heads, n_kv_heads, head_dim);
}

int32_t select_quest_pages(const float *page_scores, int32_t n, int32_t page_size, int32_t k,
                           int32_t *scratch, int32_t *out) {
  const int32_t n_pages = (n + page_size - 1) / page_size;
  for (int32_t i = 0; i < n_pages; ++i) scratch[i] = i;
  // A few hundred pages at most per layer: a plain sort is cheap here.
  std::sort(scratch, scratch + n_pages,
            [page_scores](int32_t a, int32_t b) { return ranks_before(page_scores, a, b); });
  int32_t taken = 0;
  int64_t tokens = 0;
  for (; taken < n_pages; ++taken) {
    const int32_t page = scratch[taken];
    const int32_t size = std::min(page_size, n - page * page_size);
    if (tokens + size > k) break;
    tokens += size;
  }
  std::sort(scratch, scratch + taken);
  int32_t count = 0;
  for (int32_t i = 0; i < taken; ++i) {
    const int32_t begin = scratch[i] * page_size;
    const int32_t end = std::min(n, begin + page_size);
    for (int32_t pos = begin; pos < end; ++pos) out[count++] = pos;
  }
  return count;
}

}  // namespace vegas
