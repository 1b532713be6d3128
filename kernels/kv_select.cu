#include <cstdint>
#include <type_traits>

#include "kv_select.cuh"
#include "radix_select.cuh"

namespace vegas::kernels {

namespace {

constexpr int kThreads = 512;       // the selection kernel: one block per (sequence, layer)
constexpr int kScoreThreads = 256;  // the scoring kernel: kScoreThreads * 4 candidates a block

// Whether the middle of d is ranked: else all or none of it is kept, unscored.
__device__ __forceinline__ bool ranks_middle(const KvSelectDesc &d) {
  const int m = d.n - d.tail - d.head;
  return d.scored > 0 && d.scored < m;
}

// The scoring kernel, grid (sequence x layer, candidate chunk): each thread
// scores VEC consecutive candidates of the middle [head, n - tail) with one
// VEC-wide load per captured (row, head) line. The captured scores are the
// selection's whole traffic (8K x 64 at gamma 6: 134 MB of fp16), so the
// chunks spread it over the device (one block per (sequence, layer) read it
// at about half the bandwidth) and the line loop is unrolled to keep several
// loads in flight. VEC 4 needs cap_stride a multiple of 4 and an aligned base;
// candidates outside the middle in a vector are read but not written.
template <int VEC>
__global__ void __launch_bounds__(kScoreThreads) kv_score_kernel(KvSelectParams p) {
  pdl_enter();
  using Vec = typename std::conditional<VEC == 4, uint2, f16>::type;  // VEC fp16 scores
  const int seq = blockIdx.x / p.n_layers, layer = blockIdx.x % p.n_layers;
  const KvSelectDesc d = p.desc[seq];
  if (!ranks_middle(d)) return;
  const int mid_end = d.n - d.tail;
  const int v = d.head / VEC * VEC + (blockIdx.y * kScoreThreads + threadIdx.x) * VEC;
  if (v >= mid_end) return;
  uint32_t *keys = p.keys + (static_cast<int64_t>(seq) * p.n_layers + layer) * p.key_stride;
  const int lines = (d.n_rows > 0 ? d.n_rows : 1) * p.n_heads;
  const float inv = 1.0f / static_cast<float>(lines);
  // Line i = (row i / n_heads, head i % n_heads): captured slots are consecutive.
  const int64_t line0 = (static_cast<int64_t>(layer) * p.cap_slots + d.first_slot) * p.n_heads;
  const int n_lines = d.n_rows * p.n_heads;
  float sum[VEC] = {};
#pragma unroll 8
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
    if (v + e >= d.head && v + e < mid_end) keys[v + e] = order_key(sum[e] * inv);
}

__global__ void __launch_bounds__(kThreads) kv_select_kernel(KvSelectParams p) {
  pdl_enter();
  __shared__ RadixShared radix;

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

  // 1. The middle's scores are in `keys` (kv_score_kernel).

  // 2. Radix select: the key T of the scored-th best, how many of the chosen
  // equal T (taken latest first) and how many keys equal T in all. `rank` is
  // the same for the whole block.
  RadixPick pick;
  pick.take_equal = d.scored;
  if (rank) pick = block_radix_select<kThreads>(keys, d.head, mid_end, d.scored, radix);
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
    const uint32_t k = keys[pos];
    if (k == threshold) return some_equal_dropped ? 2 : 1;
    return k > threshold ? 1 : 0;
  };
  constexpr int kWarps = kThreads / 32;
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
}

}  // namespace

cudaError_t kv_select(const KvSelectParams &p, cudaStream_t stream) {
  if (p.n_seqs == 0) return cudaSuccess;
  if (p.desc == nullptr || p.records == nullptr || p.n_layers <= 0 || p.n_seqs < 0 ||
      p.n_heads <= 0 || p.keys == nullptr || p.key_stride < 0)
    return cudaErrorInvalidValue;
  const bool aligned = p.cap_stride % 4 == 0 && reinterpret_cast<uintptr_t>(p.cap_logits) % 8 == 0;
  const int per_block = kScoreThreads * (aligned ? 4 : 1);
  // key_stride bounds every n; the chunk past a sequence's middle exits at once.
  const dim3 score_grid(static_cast<unsigned>(p.n_seqs * p.n_layers),
                        static_cast<unsigned>((p.key_stride + per_block - 1) / per_block));
  const cudaError_t e =
      aligned ? launch_kernel(kv_score_kernel<4>, score_grid, kScoreThreads, 0, stream, p)
              : launch_kernel(kv_score_kernel<1>, score_grid, kScoreThreads, 0, stream, p);
  if (e != cudaSuccess) return e;
  return launch_kernel(kv_select_kernel, p.n_seqs * p.n_layers, kThreads, 0, stream, p);
}

}  // namespace vegas::kernels
