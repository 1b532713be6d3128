// What the one-row decode attention kernels (decode_attention.cu,
// decode_attention_mma.cu) share: streaming K/V loads, the key range of a
// block (DecodeSlice), and
// their end (decode_finish): once every warp of a block has left its
// online-softmax state in shared memory (red_m: running maxima in the log2
// domain, red_l: sums of exp2(score - max), red_acc: unnormalised outputs, per
// warp and query head of the GQA group), combine the warps, then write the
// output (one split) or this split's partial result, and with split_counters
// let the last split block of the (sequence, KV head) merge all splits.
#pragma once

#include <cooperative_groups.h>
#include <cuda/atomic>

#include "kv_fp8.cuh"
#include "paged_attention.cuh"
#include "paged_keys.cuh"

namespace vegas::kernels {

#if defined(__CUDACC__)

// K/V rows are read once per step by one block: keep them out of L1.
__device__ __forceinline__ uint4 load_stream(const bf16 *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// The keys split blockIdx.y of sequence `seq` attends to: key indices
// [begin, end) of n_keys (KeyMap order; the last, n_keys - 1, is the row's own
// position, written by the step's previous kernel).
struct DecodeSlice {
  int row = 0, n_keys = 0, begin = 0, end = 0;
  const int32_t *table = nullptr;
  KeyMap keys;
  int page_shift = -1;  // log2(page_size) for power-of-two pages, else -1
  // The cache slot of key j, -1 past the slice. Power-of-two pages (the usual
  // case) take a shift instead of an integer division.
  __device__ __forceinline__ int64_t slot(const PagedAttentionParams &p, int j) const {
    return j < end ? slot_of(p, keys.pos(j)) : -1;
  }
  // slot() in its two dependent halves, for callers that batch each half's
  // loads: key j's position (-1 past the slice; a record read for sparse
  // keys), then a position's slot (a page-table read).
  __device__ __forceinline__ int position(int j) const { return j < end ? keys.pos(j) : -1; }
  __device__ __forceinline__ int64_t slot_of(const PagedAttentionParams &p, int pos) const {
    const int page = page_shift >= 0 ? pos >> page_shift : pos / p.page_size;
    return static_cast<int64_t>(table[page]) * p.page_size + (pos - page * p.page_size);
  }
};

// False for a graph-padding sequence (no row).
__device__ __forceinline__ bool decode_slice(const PagedAttentionParams &p, int seq,
                                             DecodeSlice *s) {
  if (p.seq_n_rows[seq] == 0) return false;
  s->row = p.seq_row_start[seq];
  s->table = p.page_table + p.seq_page_off[seq];
  s->keys = key_map(p, seq);
  s->n_keys = s->keys.n_sel + p.seq_start_pos[seq] + 1 - s->keys.prefix;
  const int per_split = (s->n_keys + p.n_splits - 1) / p.n_splits;
  s->begin = blockIdx.y * per_split;
  s->end = min(s->n_keys, s->begin + per_split);
  if ((p.page_size & (p.page_size - 1)) == 0) s->page_shift = __ffs(p.page_size) - 1;
  return true;
}

__device__ __forceinline__ uint2 load_stream8(const void *p) {
  uint2 v;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
               : "=r"(v.x), "=r"(v.y)
               : "l"(p));
  return v;
}

// This lane's 8 dimensions (head_off) of the K and V rows in cache slot
// `slot` as bf16, or zeros for slot < 0 (a key past the slice). FP8: the
// caches are fp8 (kv_fp8.cuh), expanded here.
template <int HD, bool FP8>
__device__ __forceinline__ void load_kv_row(const PagedAttentionParams &p, int64_t slot,
                                            int64_t row_stride, int64_t head_off, uint4 &k,
                                            uint4 &v) {
  k = v = make_uint4(0, 0, 0, 0);
  if (slot < 0) return;
  const int64_t at = slot * row_stride + head_off;
  if constexpr (FP8) {
    const int64_t head = at / HD;  // (slot, KV head): at < (that + 1) HD
    // Scales through L2 only: a line of them read ahead of the PDL wait
    // (read_ahead) would hold, in L1, the row's own scale from before the
    // previous kernel wrote it.
    k = expand8(load_stream8(reinterpret_cast<const unsigned char *>(p.k_cache) + at),
                __ldcg(p.k_scale + head));
    v = expand8(load_stream8(reinterpret_cast<const unsigned char *>(p.v_cache) + at),
                __ldcg(p.v_scale + head));
  } else {
    k = load_stream(p.k_cache + at);
    v = load_stream(p.v_cache + at);
  }
}

// A warp's first step: the slots and K/V rows of keys first + i * stride +
// lane_key (i < N). With read_ahead the indices and every cached key below the
// row's own position were final before the previous kernel began
// (PagedAttentionParams::read_ahead): those rows are requested before the PDL
// wait, the row's own key (j = n_keys - 1, written by the previous kernel)
// after it. Returns once the wait is done (the caller waited already when
// !read_ahead).
template <int HD, int N, bool FP8>
__device__ __forceinline__ void decode_first_step(const PagedAttentionParams &p,
                                                  const DecodeSlice &sl, int first, int stride,
                                                  int lane_key, int64_t row_stride,
                                                  int64_t head_off, int64_t (&slot)[N],
                                                  uint4 (&k)[N], uint4 (&v)[N]) {
  const int own = p.read_ahead ? sl.n_keys - 1 : -1;  // the key that must wait
#pragma unroll
  for (int i = 0; i < N; ++i) {
    slot[i] = sl.slot(p, first + i * stride + lane_key);
    load_kv_row<HD, FP8>(p, first + i * stride + lane_key == own ? -1 : slot[i], row_stride,
                         head_off, k[i], v[i]);
  }
  if (!p.read_ahead) return;
  pdl_wait();
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (first + i * stride + lane_key == own)
      load_kv_row<HD, FP8>(p, slot[i], row_stride, head_off, k[i], v[i]);
}

// One block's result, spread over all its threads: element k of thread t is
// output i = t + k * kThreads of the GROUP x HD (query head i / HD, dimension
// i % HD), so that a warp holds consecutive dimensions of one head and every
// thread combines a few elements. (One thread per 8 dimensions left a single
// warp of the block doing all of it, on the sparse draft step's critical
// path: README, session 32.)
template <int HD, int GROUP, int WARPS>
struct BlockSpread {
  static constexpr int kThreads = WARPS * 32;
  static constexpr int kE = (GROUP * HD + kThreads - 1) / kThreads;
  float o[kE];    // normalised by the head's sum
  float lse[kE];  // the head's log2-domain log-sum-exp, -inf when no key
  __device__ static bool has(int k) { return threadIdx.x + k * kThreads < GROUP * HD; }
  __device__ static int head(int k) { return (threadIdx.x + k * kThreads) / HD; }
  __device__ static int dim(int k) { return (threadIdx.x + k * kThreads) % HD; }
  // f(k, head, dim) for each element this thread holds.
  template <typename F>
  __device__ static void each(F &&f) {
#pragma unroll
    for (int k = 0; k < kE; ++k)
      if (has(k)) f(k, head(k), dim(k));
  }
};

// The block's warps combined, element by element (BlockSpread).
template <int HD, int GROUP, int WARPS>
__device__ __forceinline__ BlockSpread<HD, GROUP, WARPS> combine_block_warps(
    const float (*red_m)[GROUP], const float (*red_l)[GROUP], const float (*red_acc)[GROUP][HD]) {
  using Spread = BlockSpread<HD, GROUP, WARPS>;
  Spread s;
#pragma unroll
  for (int k = 0; k < Spread::kE; ++k) {
    s.o[k] = 0.0f;
    s.lse[k] = -INFINITY;
    if (!Spread::has(k)) continue;
    const int h = Spread::head(k), d = Spread::dim(k);
    float mm = -INFINITY;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) mm = fmaxf(mm, red_m[w][h]);
    float ll = 0.0f, o = 0.0f;
    if (mm != -INFINITY)
#pragma unroll
      for (int w = 0; w < WARPS; ++w) {
        const float wgt = red_m[w][h] == -INFINITY ? 0.0f : exp2f(red_m[w][h] - mm);
        ll += red_l[w][h] * wgt;
        o += red_acc[w][h][d] * wgt;
      }
    s.o[k] = o * (ll > 0.0f ? 1.0f / ll : 0.0f);
    s.lse[k] = ll > 0.0f ? mm + log2f(ll) : -INFINITY;
  }
  return s;
}

// Called by all WARPS * 32 threads of the block, after a __syncthreads that
// follows the writes to red_*. red_acc is scratch afterwards.
template <int HD, int GROUP, int WARPS>
__device__ __forceinline__ void decode_finish(const PagedAttentionParams &p, int row, int kvh,
                                              const float (*red_m)[GROUP],
                                              const float (*red_l)[GROUP],
                                              float (*red_acc)[GROUP][HD]) {
  using Spread = BlockSpread<HD, GROUP, WARPS>;
  constexpr int kWarps = WARPS;
  constexpr int kLanes = HD / 8;  // threads per query head, 8 dimensions each
  const int t = threadIdx.x;
  const Spread s = combine_block_warps<HD, GROUP, WARPS>(red_m, red_l, red_acc);
  const int64_t split_stride = static_cast<int64_t>(p.total_rows) * p.n_heads;
  Spread::each([&](int k, int h, int d) {
    const int64_t item = static_cast<int64_t>(row) * p.n_heads + kvh * GROUP + h;
    if (p.n_splits == 1) {
      p.out[item * HD + d] = __float2bfloat16_rn(s.o[k]);
    } else {
      const int64_t at = blockIdx.y * split_stride + item;  // split 0's (row, head) + this split
      p.partial_out[at * HD + d] = s.o[k];
      if (d == 0) p.partial_lse[at] = s.lse[k];
    }
  });
  if (p.n_splits == 1) return;
  if (p.split_counters == nullptr) return;  // paged_attention_merge combines the splits

  // The last split block of this (sequence, KV head) to finish merges them all:
  // publish the partials, count, and let the block that brings the count to
  // n_splits read everyone's from L2. The count is one acquire-release atomic
  // of thread 0, ordered after the block's partial writes by the barrier:
  // it releases them and, in the last block, acquires everyone's. (It
  // replaces a __threadfence() by every thread before the count and one after
  // it in the last block; with the flat reduction in qkv_rope_mma, 22m 2K x 1
  // steps went from 0.181-0.184 to 0.167-0.172 ms on the H100.)
  __shared__ bool last;
  __syncthreads();
  if (t == 0) {
    cuda::atomic_ref<int32_t, cuda::thread_scope_device> counter(p.split_counters[blockIdx.x]);
    last = counter.fetch_add(1, cuda::memory_order_acq_rel) == p.n_splits - 1;
    if (last) counter.store(0, cuda::memory_order_relaxed);  // ready for the next launch
  }
  __syncthreads();
  if (!last) return;
  // Every split's weight per head (all threads load the lse at once), then
  // each (head, 8 dimensions) piece is summed by kWarps threads over every
  // kWarps-th split, so the loads of a chain are few and independent. A
  // thread's first kEarly partials do not depend on the weights: they are
  // requested together with the lse, one dependent round trip instead of two.
  constexpr int kPieces = GROUP * kLanes;
  constexpr int kSubs = kWarps * 32 / kPieces < kWarps ? kWarps * 32 / kPieces : kWarps;
  constexpr int kEarly = 2;
  const int piece = t % kPieces, sub = t / kPieces;
  const int ph = piece / kLanes, pc = piece % kLanes;
  const int64_t pitem = static_cast<int64_t>(row) * p.n_heads + kvh * GROUP + ph;
  auto partial_of = [&](int z) { return p.partial_out + (z * split_stride + pitem) * HD + pc * 8; };
  float4 early[kEarly][2];
#pragma unroll
  for (int k = 0; k < kEarly; ++k) {
    const int z = sub + k * kSubs;
    early[k][0] = early[k][1] = make_float4(0, 0, 0, 0);
    if (sub < kSubs && z < p.n_splits) {
      early[k][0] = __ldcg(reinterpret_cast<const float4 *>(partial_of(z)));
      early[k][1] = __ldcg(reinterpret_cast<const float4 *>(partial_of(z) + 4));
    }
  }
  __shared__ float weight[GROUP][64];
  __shared__ float inv_sum[GROUP];
  for (int i = t; i < GROUP * p.n_splits; i += kWarps * 32) {
    const int hh = i / p.n_splits, z = i % p.n_splits;
    weight[hh][z] = __ldcg(p.partial_lse + z * split_stride + row * p.n_heads + kvh * GROUP + hh);
  }
  __syncthreads();
  if (t < GROUP) {
    float m_all = -INFINITY, wsum = 0.0f;
    for (int z = 0; z < p.n_splits; ++z) m_all = fmaxf(m_all, weight[t][z]);
    for (int z = 0; z < p.n_splits; ++z) {
      const float wz =
          m_all == -INFINITY || weight[t][z] == -INFINITY ? 0.0f : exp2f(weight[t][z] - m_all);
      weight[t][z] = wz;
      wsum += wz;
    }
    inv_sum[t] = wsum > 0.0f ? 1.0f / wsum : 0.0f;
  }
  __syncthreads();
  float r[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  auto add = [&](float wz, const float4 &a, const float4 &b) {
    if (wz == 0.0f) return;  // an empty split: its partial is never added
    r[0] += wz * a.x, r[1] += wz * a.y, r[2] += wz * a.z, r[3] += wz * a.w;
    r[4] += wz * b.x, r[5] += wz * b.y, r[6] += wz * b.z, r[7] += wz * b.w;
  };
  if (sub < kSubs) {
#pragma unroll
    for (int k = 0; k < kEarly; ++k) {
      const int z = sub + k * kSubs;
      if (z < p.n_splits) add(weight[ph][z], early[k][0], early[k][1]);
    }
#pragma unroll 4
    for (int z = sub + kEarly * kSubs; z < p.n_splits; z += kSubs) {
      const float wz = weight[ph][z];
      if (wz == 0.0f) continue;
      add(wz, __ldcg(reinterpret_cast<const float4 *>(partial_of(z))),
          __ldcg(reinterpret_cast<const float4 *>(partial_of(z) + 4)));
    }
  }
  // Add the subsets (the warps' reduction buffer is free now).
  float *sums = &red_acc[0][0][0];  // kWarps * GROUP * HD floats >= (kSubs - 1) * kPieces * 8
  __syncthreads();
  if (sub > 0 && sub < kSubs)
#pragma unroll
    for (int e = 0; e < 8; ++e) sums[((sub - 1) * GROUP * kLanes + piece) * 8 + e] = r[e];
  __syncthreads();
  if (sub != 0) return;
  for (int s2 = 1; s2 < kSubs; ++s2)
#pragma unroll
    for (int e = 0; e < 8; ++e) r[e] += sums[((s2 - 1) * GROUP * kLanes + piece) * 8 + e];
#pragma unroll
  for (int e = 0; e < 8; ++e) r[e] *= inv_sum[ph];
  *reinterpret_cast<uint4 *>(p.out + pitem * HD + pc * 8) = pack8(r);
}

// decode_finish for a launch whose thread-block clusters are the n_splits
// (<= kMaxClusterSplits) split blocks of one (sequence, KV head): the blocks
// leave their pieces and lse in their own shared memory, and after a cluster
// barrier block rank 0 reads every block's through distributed shared memory
// and writes the output. No partial results, counters or L2 round trips; a
// second barrier keeps each block's shared memory alive until rank 0 has read
// it. Same arguments and calling rule as decode_finish.
constexpr int kMaxClusterSplits = 8;

template <int HD, int GROUP, int WARPS, typename Mark>
__device__ __forceinline__ void decode_finish_cluster(const PagedAttentionParams &p, int row,
                                                      int kvh, const float (*red_m)[GROUP],
                                                      const float (*red_l)[GROUP],
                                                      const float (*red_acc)[GROUP][HD],
                                                      Mark mark) {
  namespace cg = cooperative_groups;
  using Spread = BlockSpread<HD, GROUP, WARPS>;
  __shared__ float piece_o[GROUP][HD];
  __shared__ float piece_lse[GROUP];
  const Spread s = combine_block_warps<HD, GROUP, WARPS>(red_m, red_l, red_acc);
  Spread::each([&](int k, int h, int d) {
    piece_o[h][d] = s.o[k];
    if (d == 0) piece_lse[h] = s.lse[k];
  });
  mark(9);
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block's pieces written and visible to the cluster
  mark(10);
  if (cluster.block_rank() == 0) {
    const int n = static_cast<int>(cluster.num_blocks());
    Spread::each([&](int, int h, int d) {
      // Every split's lse and element requested at once: one round trip.
      float lse[kMaxClusterSplits], o[kMaxClusterSplits];
#pragma unroll
      for (int z = 0; z < kMaxClusterSplits; ++z) {
        lse[z] = z < n ? cluster.map_shared_rank(&piece_lse[0], z)[h] : -INFINITY;
        o[z] = z < n ? cluster.map_shared_rank(&piece_o[0][0], z)[h * HD + d] : 0.0f;
      }
      float m_all = -INFINITY;
#pragma unroll
      for (int z = 0; z < kMaxClusterSplits; ++z) m_all = fmaxf(m_all, lse[z]);
      float r = 0.0f, wsum = 0.0f;
#pragma unroll
      for (int z = 0; z < kMaxClusterSplits; ++z) {
        if (lse[z] == -INFINITY) continue;  // an empty split (or none) adds nothing
        const float wz = exp2f(lse[z] - m_all);
        wsum += wz;
        r += wz * o[z];
      }
      r *= wsum > 0.0f ? 1.0f / wsum : 0.0f;
      const int64_t item = static_cast<int64_t>(row) * p.n_heads + kvh * GROUP + h;
      p.out[item * HD + d] = __float2bfloat16_rn(r);
    });
  }
  mark(11);
  cluster.sync();  // rank 0 has read every block's shared memory
}

#endif  // __CUDACC__

}  // namespace vegas::kernels
