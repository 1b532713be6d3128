#include <cstdint>
#include <type_traits>

#include "kv_select.cuh"
#include "radix_select.cuh"
#include "timeline.cuh"

#if defined(VEGAS_TIMELINE)
VEGAS_TIMELINE_TABLE(tl_select)
#endif

namespace vegas::kernels {

namespace {

// The selection kernel, one block per (sequence, layer): 1024 threads while
// its blocks fit on the device at once (their scoring, radix passes and
// compaction are latency-bound), else 512 (four blocks a multiprocessor).
constexpr int kThreads = 512, kWideThreads = 1024;
constexpr int kScoreThreads = 256;  // the scoring kernel: kScoreThreads * 4 candidates a block
// A middle of up to this many candidates is scored by the selection block
// itself, into shared memory (192 KB): no scoring kernel, no round trip of
// the keys through L2, and the radix passes and the compaction read them
// there. Larger middles are scored by kv_score_kernel into `keys`.
constexpr int kMaxStagedKeys = 48 * 1024;

// Whether the middle of d is ranked: else all or none of it is kept, unscored.
__device__ __forceinline__ bool ranks_middle(const KvSelectDesc &d) {
  const int m = d.n - d.tail - d.head;
  return d.scored > 0 && d.scored < m;
}

// Scores of the VEC consecutive candidates from v (those inside the middle
// [head, n - tail)) into dst[v + e - dst_first]: the mean over the captured
// (row, head) lines, one VEC-wide load a line. VEC 4 needs cap_stride a
// multiple of 4 and an aligned base; candidates outside the middle in a
// vector are read but not written. The line loop is unrolled to keep its
// loads in flight: the captured scores are the selection's whole traffic.
template <int VEC, int UNROLL>
__device__ __forceinline__ void score_candidates(const KvSelectParams &p, const KvSelectDesc &d,
                                                 int layer, int v, uint32_t *dst, int dst_first) {
  using Vec = typename std::conditional<VEC == 4, uint2, f16>::type;  // VEC fp16 scores
  const int mid_end = d.n - d.tail;
  const int lines = (d.n_rows > 0 ? d.n_rows : 1) * p.n_heads;
  const float inv = 1.0f / static_cast<float>(lines);
  // Line i = (row i / n_heads, head i % n_heads): captured slots are consecutive.
  const int64_t line0 = (static_cast<int64_t>(layer) * p.cap_slots + d.first_slot) * p.n_heads;
  const int n_lines = d.n_rows * p.n_heads;
  float sum[VEC] = {};
#pragma unroll UNROLL
  for (int i = 0; i < n_lines; ++i) {
    const Vec x = *reinterpret_cast<const Vec *>(p.cap_logits + (line0 + i) * p.cap_stride + v);
    const f16 *xh = reinterpret_cast<const f16 *>(&x);
    const float lse = d.weight ? p.cap_lse[line0 + i] : 0.0f;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float xs = __half2float(xh[e]);
      sum[e] += d.weight ? __expf(xs - lse) : xs;
    }
  }
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    if (v + e >= d.head && v + e < mid_end) dst[v + e - dst_first] = order_key(sum[e] * inv);
}

// The scoring kernel for middles past kMaxStagedKeys, grid (sequence x layer,
// candidate chunk): each thread scores VEC candidates into `keys`, so the
// chunks spread the reading over the device.
template <int VEC>
__global__ void __launch_bounds__(kScoreThreads) kv_score_kernel(KvSelectParams p) {
  pdl_enter();
  const int seq = blockIdx.x / p.n_layers, layer = blockIdx.x % p.n_layers;
  const KvSelectDesc d = p.desc[seq];
  if (!ranks_middle(d)) return;
  const int v = d.head / VEC * VEC + (blockIdx.y * kScoreThreads + threadIdx.x) * VEC;
  if (v >= d.n - d.tail) return;
  uint32_t *keys = p.keys + (static_cast<int64_t>(seq) * p.n_layers + layer) * p.key_stride;
  score_candidates<VEC, 8>(p, d, layer, v, keys, 0);
}

// One block of THREADS per (sequence, layer). SCORE_VEC 0: kv_score_kernel
// wrote the middle's keys to `keys`; else the block scores its middle itself,
// SCORE_VEC candidates a load, into shared memory (key_stride keys). The
// wide form is told it runs alone on a multiprocessor: without that ptxas
// gave its unaligned variant 32 registers and spills.
template <int SCORE_VEC, int THREADS>
__global__ void __launch_bounds__(THREADS, THREADS == kWideThreads ? 1 : 0)
    kv_select_kernel(KvSelectParams p) {
  pdl_enter();
  __shared__ RadixShared radix;
  extern __shared__ uint32_t staged[];
  VEGAS_MARK(tl_select, 0, true);

  const int seq = blockIdx.x / p.n_layers, layer = blockIdx.x % p.n_layers;
  const KvSelectDesc d = p.desc[seq];
  const int n = d.n;
  const int mid_end = n - d.tail;
  int32_t *rec = p.records + d.record_off;
  if (threadIdx.x == 0) {
    if (layer == 0) {
      rec[0] = n;
      rec[1] = d.stride;
    }
    rec[2 + layer] = d.head + d.tail + d.scored;
  }
  int32_t *out = rec + 2 + p.n_layers + static_cast<int64_t>(layer) * d.stride;
  uint32_t *keys = p.keys + (static_cast<int64_t>(seq) * p.n_layers + layer) * p.key_stride;
  const int m = mid_end - d.head;  // scored range [head, mid_end)
  const bool rank = ranks_middle(d);

  // 1. The middle's scores: mid[i] is the key of position head + i.
  const uint32_t *mid = keys + d.head;
  if constexpr (SCORE_VEC > 0) {
    // 16 lines (2 rows x 8 heads) in flight a thread. (Two vectors a thread,
    // 32 lines, took longer.)
    if (rank)
      for (int v = d.head / SCORE_VEC * SCORE_VEC + threadIdx.x * SCORE_VEC; v < mid_end;
           v += THREADS * SCORE_VEC)
        score_candidates<SCORE_VEC, 16>(p, d, layer, v, staged, d.head);
    mid = staged;  // block_radix_select's first barrier publishes it
  }
  VEGAS_MARK(tl_select, 1, true);

  // 2. Radix select: the key T of the scored-th best, how many of the chosen
  // equal T (taken latest first) and how many keys equal T in all. `rank` is
  // the same for the whole block.
  RadixPick pick;
  pick.take_equal = d.scored;
  if (rank) pick = block_radix_select<THREADS>(mid, 0, m, d.scored, radix);
  VEGAS_MARK(tl_select, 2, true);
  const uint32_t threshold = pick.threshold;
  const int take_equal = pick.take_equal, n_equal = pick.n_equal;
  // Block-uniform: without ties dropped at T every key equal to it is kept,
  // and the compaction needs one block scan instead of two.
  const bool some_equal_dropped = rank && take_equal < n_equal;
  // The first kept key equal to T, counting those keys in position order.
  const int first_equal_kept = some_equal_dropped ? n_equal - take_equal : 0;

  // 3. Ordered compaction over [0, n): keep the head, the tail, keys above T,
  // and the last take_equal of the keys equal to T. Each warp takes a
  // contiguous range, 32 candidates at a time (coalesced), counts with
  // ballots, and one barrier shares the warps' counts; a block scan per 512
  // candidates had taken most of the kernel's time. Verdict 1: kept, 2: equal
  // to T with some of those dropped (kept if among the last take_equal), 0: dropped.
  auto verdict = [&](int pos) -> int {
    if (pos >= n) return 0;
    if (pos < d.head || pos >= mid_end) return 1;
    if (!rank) return d.scored >= m ? 1 : 0;
    const uint32_t k = mid[pos - d.head];
    if (k == threshold) return some_equal_dropped ? 2 : 1;
    return k > threshold ? 1 : 0;
  };
  constexpr int kWarps = THREADS / 32;
  __shared__ int warp_kept[kWarps], warp_equal[kWarps];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int per_warp = (n + kWarps * 32 - 1) / (kWarps * 32) * 32;
  const int lo = warp * per_warp, hi = min(n, lo + per_warp);
  int kept = 0, equal = 0;
  for (int base = lo; base < hi; base += 32) {
    const int v = verdict(base + lane);
    kept += __popc(__ballot_sync(0xffffffffu, v == 1));
    equal += __popc(__ballot_sync(0xffffffffu, v == 2));
  }
  if (lane == 0) {
    warp_kept[warp] = kept;
    warp_equal[warp] = equal;
  }
  __syncthreads();
  VEGAS_MARK(tl_select, 3, true);
  int kept_before = 0, equal_before = 0;  // over the warps before this one
  for (int w = 0; w < warp; ++w) {
    kept_before += warp_kept[w];
    equal_before += warp_equal[w];
  }
  // Equal keys are numbered in position order; those from first_equal_kept on are kept.
  int at = kept_before + max(0, equal_before - first_equal_kept);
  const unsigned below = (1u << lane) - 1u;
  for (int base = lo, e = equal_before; base < hi; base += 32) {
    const int v = verdict(base + lane);
    const unsigned eq = __ballot_sync(0xffffffffu, v == 2);
    const bool keep = v == 1 || (v == 2 && e + __popc(eq & below) >= first_equal_kept);
    const unsigned keeps = __ballot_sync(0xffffffffu, keep);
    if (keep) out[at + __popc(keeps & below)] = base + lane;
    at += __popc(keeps);
    e += __popc(eq);
  }
  VEGAS_MARK(tl_select, 4, true);
}

}  // namespace

cudaError_t kv_select(const KvSelectParams &p, cudaStream_t stream) {
  if (p.n_seqs == 0) return cudaSuccess;
  if (p.desc == nullptr || p.records == nullptr || p.n_layers <= 0 || p.n_seqs < 0 ||
      p.n_heads <= 0 || p.keys == nullptr || p.key_stride < 0)
    return cudaErrorInvalidValue;
  const bool aligned = p.cap_stride % 4 == 0 && reinterpret_cast<uintptr_t>(p.cap_logits) % 8 == 0;
  const unsigned blocks = static_cast<unsigned>(p.n_seqs * p.n_layers);
  if (p.key_stride <= kMaxStagedKeys) {  // key_stride bounds every n: the blocks score
    const size_t smem = static_cast<size_t>(p.key_stride) * sizeof(uint32_t);
    int device = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e != cudaSuccess) return e;
    if (blocks <= static_cast<unsigned>(sms))
      return aligned ? launch_kernel(kv_select_kernel<4, kWideThreads>, blocks, kWideThreads, smem,
                                     stream, p)
                     : launch_kernel(kv_select_kernel<1, kWideThreads>, blocks, kWideThreads, smem,
                                     stream, p);
    return aligned
               ? launch_kernel(kv_select_kernel<4, kThreads>, blocks, kThreads, smem, stream, p)
               : launch_kernel(kv_select_kernel<1, kThreads>, blocks, kThreads, smem, stream, p);
  }
  const int per_block = kScoreThreads * (aligned ? 4 : 1);
  // key_stride bounds every n; the chunk past a sequence's middle exits at once.
  const dim3 score_grid(blocks, static_cast<unsigned>((p.key_stride + per_block - 1) / per_block));
  const cudaError_t e =
      aligned ? launch_kernel(kv_score_kernel<4>, score_grid, kScoreThreads, 0, stream, p)
              : launch_kernel(kv_score_kernel<1>, score_grid, kScoreThreads, 0, stream, p);
  if (e != cudaSuccess) return e;
  return launch_kernel(kv_select_kernel<0, kThreads>, blocks, kThreads, 0, stream, p);
}

cudaError_t kv_select_init() {
  const int bytes = kMaxStagedKeys * static_cast<int>(sizeof(uint32_t));
  const cudaFuncAttribute attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
  cudaError_t e = cudaFuncSetAttribute(kv_select_kernel<1, kThreads>, attr, bytes);
  if (e == cudaSuccess) e = cudaFuncSetAttribute(kv_select_kernel<4, kThreads>, attr, bytes);
  if (e == cudaSuccess) e = cudaFuncSetAttribute(kv_select_kernel<1, kWideThreads>, attr, bytes);
  if (e == cudaSuccess) e = cudaFuncSetAttribute(kv_select_kernel<4, kWideThreads>, attr, bytes);
  return e;
}

}  // namespace vegas::kernels
