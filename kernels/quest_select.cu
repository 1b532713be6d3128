#include <cub/block/block_scan.cuh>

#include "kv_fp8.cuh"
#include "quest_select.cuh"
#include "radix_select.cuh"

namespace vegas::kernels {

namespace {

constexpr int kBoundsThreads = 128;
constexpr int kScoreWarps = 8;
constexpr int kScoreBlocks = 16;  // per sequence: 128 warps share its pages
constexpr int kPickThreads = 512;
constexpr int kMaxQueryFloats = 48 * 1024 / 4;  // the score kernel's dynamic shared memory

using bf16x2 = __nv_bfloat162;

__device__ __forceinline__ float2 load2(const bf16 *row, int pair) {
  return __bfloat1622float2(reinterpret_cast<const bf16x2 *>(row)[pair]);
}

// Elements 2 pair, 2 pair + 1 at element offset `at` of one layer's K cache
// (`layer_off` elements into `cache`): bf16, or with `scales` (that layer's)
// fp8 (kv_fp8.cuh) expanded to the same bf16 the attention kernels see.
__device__ __forceinline__ float2 load_key2(const bf16 *cache, int64_t layer_off,
                                            const float *scales, int64_t at, int pair,
                                            int head_dim) {
  if (scales == nullptr) return load2(cache + layer_off + at, pair);
  const int64_t e = at + 2 * pair;
  const uint32_t two = *reinterpret_cast<const uint16_t *>(
      reinterpret_cast<const unsigned char *>(cache) + layer_off + e);
  const uint32_t b = expand_pair(two, scales[e / head_dim]);
  return __bfloat1622float2(*reinterpret_cast<const bf16x2 *>(&b));
}

// One block per (listed page, layer): min and max over the page's slots.
__global__ void __launch_bounds__(kBoundsThreads) quest_bounds_kernel(QuestBoundsParams p) {
  pdl_enter();
  const int page = p.pages != nullptr ? p.pages[blockIdx.x] : static_cast<int>(blockIdx.x);
  if (page < 0 || page >= p.num_pages) return;
  const int64_t layer = blockIdx.y;
  const int64_t k = static_cast<int64_t>(page) * p.page_size * p.kv_dim;  // in the layer
  const float *k_scale = p.k_scale ? p.k_scale + layer * p.k_scale_layer_stride : nullptr;
  const int64_t at = (layer * p.num_pages + page) * p.kv_dim;
  for (int pair = threadIdx.x; pair < p.kv_dim / 2; pair += kBoundsThreads) {
    float2 lo = make_float2(INFINITY, INFINITY), hi = make_float2(-INFINITY, -INFINITY);
    for (int t = 0; t < p.page_size; ++t) {
      const float2 v = load_key2(p.k_cache, layer * p.k_layer_stride, k_scale,
                                 k + static_cast<int64_t>(t) * p.kv_dim, pair, p.head_dim);
      lo = make_float2(fminf(lo.x, v.x), fminf(lo.y, v.y));
      hi = make_float2(fmaxf(hi.x, v.x), fmaxf(hi.y, v.y));
    }
    // Exact: the min or max of bf16 values is one of them.
    reinterpret_cast<bf16x2 *>(p.key_min + at)[pair] = __float22bfloat162_rn(lo);
    reinterpret_cast<bf16x2 *>(p.key_max + at)[pair] = __float22bfloat162_rn(hi);
  }
}

// Blocks (sequence, part): one warp per page, pages strided over the parts.
__global__ void __launch_bounds__(kScoreWarps * 32) quest_score_kernel(QuestSelectParams p) {
  pdl_enter();
  extern __shared__ float q_s[];  // the sequence's query, [n_heads][head_dim]
  const int seq = blockIdx.x;
  const int n = p.seq_prefix[seq];
  const int ps = p.page_size;
  const int n_pages = n > 0 ? (n + ps - 1) / ps : 0;
  const int first = blockIdx.y * kScoreWarps;
  // Not a quest sequence, no page for this block, or more pages than the
  // scratch holds (the host sizes it; the choice then keeps no page).
  if (first >= n_pages || n_pages > p.key_stride) return;
  const int q_dim = p.n_heads * p.head_dim;
  const bf16 *q = p.q + static_cast<int64_t>(p.seq_row_start[seq]) * q_dim;
  for (int i = threadIdx.x; i < q_dim; i += blockDim.x) q_s[i] = __bfloat162float(q[i]);
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int hd = p.head_dim, group = p.n_heads / p.n_kv_heads;
  const int kv_dim = p.n_kv_heads * hd, full = n / ps;
  const int32_t *table = p.page_table + p.seq_page_off[seq];
  uint32_t *keys = p.keys + static_cast<int64_t>(seq) * p.key_stride;
  for (int page = first + warp; page < n_pages; page += gridDim.y * kScoreWarps) {
    const int64_t kv_page = table[page];
    const int len = n - page * ps;  // tokens of the partial last page (page == full)
    float acc = 0.0f;
    for (int pair = lane; pair < kv_dim / 2; pair += 32) {
      float2 lo, hi;
      if (page < full) {
        lo = load2(p.key_min + kv_page * kv_dim, pair);
        hi = load2(p.key_max + kv_page * kv_dim, pair);
      } else {
        lo = make_float2(INFINITY, INFINITY);
        hi = make_float2(-INFINITY, -INFINITY);
        for (int t = 0; t < len; ++t) {
          const float2 v =
              load_key2(p.k_cache, 0, p.k_scale, (kv_page * ps + t) * kv_dim, pair, hd);
          lo = make_float2(fminf(lo.x, v.x), fminf(lo.y, v.y));
          hi = make_float2(fmaxf(hi.x, v.x), fmaxf(hi.y, v.y));
        }
      }
      const int e = 2 * pair, kv_head = e / hd, d = e % hd;  // d, d + 1: one head (hd even)
      const float *qh = q_s + kv_head * group * hd + d;
      for (int g = 0; g < group; ++g) {
        const float q0 = qh[g * hd], q1 = qh[g * hd + 1];
        acc += fmaxf(q0 * hi.x, q0 * lo.x) + fmaxf(q1 * hi.y, q1 * lo.y);
      }
    }
    acc = warp_sum(acc);
    if (lane == 0) keys[page] = order_key(acc);
  }
}

// One block per sequence: how many pages fit, which, and their positions.
__global__ void __launch_bounds__(kPickThreads) quest_pick_kernel(QuestSelectParams p) {
  pdl_enter();
  using Scan = cub::BlockScan<int, kPickThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ RadixShared radix;
  __shared__ int s_short;  // tokens the kept partial page lacks of a full one

  const int seq = blockIdx.x;
  const int n = p.seq_prefix[seq];
  if (n < 0) return;
  const int ps = p.page_size, budget = p.seq_budget[seq];
  const int stride = quest_record_stride(n, budget);
  int32_t *rec = p.records + p.seq_record_off[seq];
  int32_t *out = rec + 2 + p.n_layers + static_cast<int64_t>(p.layer) * stride;
  const int n_pages = (n + ps - 1) / ps;
  if (threadIdx.x == 0) {
    rec[0] = n;
    rec[1] = stride;
    s_short = 0;
  }
  if (n == 0 || n_pages > p.key_stride) {
    if (threadIdx.x == 0) rec[2 + p.layer] = 0;
    return;
  }
  const uint32_t *keys = p.keys + static_cast<int64_t>(seq) * p.key_stride;

  // Pages taken in rank order while their tokens fit: every page but the last
  // has ps tokens, so m0 = budget / ps of them, plus the short last page when
  // it ranks among the first m0 + 1 and fits the rest.
  const int last_len = n - (n_pages - 1) * ps;
  const int m0 = budget / ps, rest = budget - m0 * ps;
  int m = m0;
  if (m0 >= n_pages) {
    m = n_pages;
  } else if (last_len < ps) {
    const uint32_t last = keys[n_pages - 1];
    int above = 0, total;  // pages ranked before the last one (ties rank it first)
    for (int i = threadIdx.x; i < n_pages - 1; i += kPickThreads) above += keys[i] > last;
    Scan(scan_tmp).ExclusiveSum(above, above, total);
    __syncthreads();
    if (total <= m0 && last_len <= rest) m += 1;
  }

  RadixPick pick;
  const bool rank = m > 0 && m < n_pages;  // the same for the whole block
  if (rank) pick = block_radix_select<kPickThreads>(keys, 0, n_pages, m, radix);

  // Ordered compaction: keys above the threshold, and of the keys equal to it
  // the last take_equal; a kept page's positions start at (pages kept before
  // it) * ps, all of those being full pages.
  int taken = 0, equal_seen = 0;
  for (int base = 0; base < n_pages; base += kPickThreads) {
    const int page = base + threadIdx.x;
    bool keep = false, equal = false;
    if (page < n_pages && m > 0) {
      if (!rank) {
        keep = true;
      } else {
        const uint32_t k = keys[page];
        keep = k > pick.threshold;
        equal = k == pick.threshold;
      }
    }
    int equal_before, equal_chunk;
    Scan(scan_tmp).ExclusiveSum(equal ? 1 : 0, equal_before, equal_chunk);
    __syncthreads();
    if (equal && equal_seen + equal_before >= pick.n_equal - pick.take_equal) keep = true;
    int keep_before, keep_chunk;
    Scan(scan_tmp).ExclusiveSum(keep ? 1 : 0, keep_before, keep_chunk);
    __syncthreads();
    if (keep) {
      const int len = min(ps, n - page * ps);
      int32_t *dst = out + static_cast<int64_t>(taken + keep_before) * ps;
      for (int o = 0; o < len; ++o) dst[o] = page * ps + o;
      if (len < ps) s_short = ps - len;
    }
    taken += keep_chunk;
    equal_seen += equal_chunk;
  }
  __syncthreads();
  if (threadIdx.x == 0) rec[2 + p.layer] = taken * ps - s_short;
}

}  // namespace

cudaError_t quest_bounds(const QuestBoundsParams &p, cudaStream_t stream) {
  const int32_t blocks = p.pages != nullptr ? p.n_listed : p.num_pages;
  if (blocks == 0 || p.n_layers == 0) return cudaSuccess;
  if (p.k_cache == nullptr || p.key_min == nullptr || p.key_max == nullptr || blocks < 0 ||
      p.n_layers < 0 || p.n_layers > 65535 || p.num_pages <= 0 || p.page_size <= 0 ||
      p.kv_dim <= 0 || (p.kv_dim & 1) ||
      p.k_layer_stride < static_cast<int64_t>(p.num_pages) * p.page_size * p.kv_dim ||
      (p.k_scale != nullptr && (p.head_dim <= 0 || (p.head_dim & 1) || p.kv_dim % p.head_dim)))
    return cudaErrorInvalidValue;
  return launch_kernel(quest_bounds_kernel, dim3(blocks, p.n_layers), kBoundsThreads, 0, stream, p);
}

bool quest_select_supports(int32_t n_heads, int32_t head_dim) {
  return n_heads > 0 && head_dim > 0 && head_dim % 2 == 0 &&
         static_cast<int64_t>(n_heads) * head_dim <= kMaxQueryFloats;
}

cudaError_t quest_select(const QuestSelectParams &p, cudaStream_t stream) {
  if (p.n_seqs == 0) return cudaSuccess;
  if (p.q == nullptr || p.k_cache == nullptr || p.key_min == nullptr || p.key_max == nullptr ||
      p.page_table == nullptr || p.seq_page_off == nullptr || p.seq_row_start == nullptr ||
      p.seq_prefix == nullptr || p.seq_budget == nullptr || p.seq_record_off == nullptr ||
      p.records == nullptr || p.keys == nullptr || p.n_seqs < 0 || p.n_kv_heads <= 0 ||
      !quest_select_supports(p.n_heads, p.head_dim) || p.n_heads % p.n_kv_heads != 0 ||
      p.page_size <= 0 || p.key_stride < 0 || p.n_layers <= 0 || p.layer < 0 ||
      p.layer >= p.n_layers)
    return cudaErrorInvalidValue;
  const size_t smem = sizeof(float) * static_cast<size_t>(p.n_heads) * p.head_dim;
  const cudaError_t e = launch_kernel(quest_score_kernel, dim3(p.n_seqs, kScoreBlocks),
                                      kScoreWarps * 32, smem, stream, p);
  if (e != cudaSuccess) return e;
  return launch_kernel(quest_pick_kernel, dim3(p.n_seqs), kPickThreads, 0, stream, p);
}

}  // namespace vegas::kernels
