// Shared-memory staging of the tensor-core attention kernels with many query
// rows (prefill_attention.cu, verify_attention.cu), by cp.async:
//  - a block's query vectors: (row, head of the GQA group) pairs, row-major,
//    HD bf16 each, into rows of STRIDE elements;
//  - K/V tiles of N consecutive key positions of one KV head, gathered
//    through the sequence's page table. The cache offsets (a page-table read
//    each) are found one tile ahead (locate), so that read's latency hides
//    behind a tile of math instead of delaying the copy (load).
#pragma once

#include "kv_fp8.cuh"
#include "mma_fragments.cuh"
#include "paged_attention.cuh"

namespace vegas::kernels {

#if defined(__CUDACC__)

// Query vectors v0 .. v0 + count - 1 into q_s (zeros past v_last), by the
// block's THREADS threads; the caller commits the cp.async group.
template <int HD, int STRIDE, int THREADS>
__device__ __forceinline__ void stage_query_vectors(const PagedAttentionParams &p, bf16 *q_s,
                                                    int count, int v0, int v_last, int row_start,
                                                    int group, int kvh) {
  constexpr int kChunks = HD / 8;  // 16-byte chunks per vector
  for (int i = threadIdx.x; i < count * kChunks; i += THREADS) {
    const int v = i / kChunks, c = i % kChunks;
    const int gv = v0 + v;
    const bool valid = gv <= v_last;
    int64_t off = 0;
    if (valid) {
      const int64_t row = row_start + gv / group;
      off = (row * p.n_heads + kvh * group + gv % group) * HD + c * 8;
    }
    mma::cp_async16(q_s + v * STRIDE + c * 8, p.q + off, valid);
  }
}

// K/V tiles of N positions of KV head kvh: each of the THREADS threads copies
// kLoads (position, 8-element chunk) pairs of K and of V per tile. FP8: fp8
// caches (kv_fp8.cuh), staged by load and expanded by expand once landed.
template <int HD, int N, int STRIDE, int THREADS, bool FP8 = false>
struct PagedKvTiles {
  static constexpr int kChunks = HD / 8;
  static constexpr int kLoads = N * kChunks / THREADS;
  static_assert(N * kChunks % THREADS == 0, "whole K/V tiles per pass");
  const PagedAttentionParams &p;
  const int32_t *table;  // the sequence's page table
  int kvh;
  int64_t off[kLoads];  // element offsets in the caches, -1 = past the range (zero fill)

  // The offsets of the tile that starts at position tile_start; positions at
  // or past `end` are zero-filled.
  __device__ __forceinline__ void locate(int tile_start, int end) {
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      const int i = threadIdx.x + k * THREADS;
      const int pos = tile_start + i / kChunks;
      off[k] = -1;
      if (pos < end) {
        const int64_t slot =
            static_cast<int64_t>(table[pos / p.page_size]) * p.page_size + pos % p.page_size;
        off[k] = (slot * p.n_kv_heads + kvh) * HD + (i % kChunks) * 8;
      }
    }
  }
  // Copies the located tile into stage `stage` of k_s / v_s ([stage][N][STRIDE]).
  __device__ __forceinline__ void load(int stage, bf16 *k_s, bf16 *v_s) const {
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      const int i = threadIdx.x + k * THREADS;
      const int row = stage * N * STRIDE + (i / kChunks) * STRIDE;
      const int64_t o = off[k] < 0 ? 0 : off[k];
      stage_piece<HD, FP8>(k_s + row, i % kChunks, p.k_cache, p.k_scale, o, off[k] >= 0);
      stage_piece<HD, FP8>(v_s + row, i % kChunks, p.v_cache, p.v_scale, o, off[k] >= 0);
    }
  }
  // FP8: expands stage `stage` (every thread's copies landed and visible),
  // one row per thread at a time; the caller syncs the block before reading it.
  __device__ __forceinline__ void expand(int stage, bf16 *k_s, bf16 *v_s) const {
    if constexpr (FP8) {
      for (int r = threadIdx.x; r < 2 * N; r += THREADS)
        expand_staged_row<HD>((r < N ? k_s : v_s) + stage * N * STRIDE + (r % N) * STRIDE);
    }
  }
};

#endif  // __CUDACC__

}  // namespace vegas::kernels
