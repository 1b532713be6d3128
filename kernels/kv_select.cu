#include <cub/block/block_scan.cuh>

#include <cstdint>
#include <type_traits>

#include "kv_select.cuh"
#include "radix_select.cuh"

namespace vegas::kernels {

namespace {

constexpr int kThreads = 512;

// Each thread scores VEC consecutive candidates per pass with one VEC-wide
// load per captured (row, head) line: the captured scores are the kernel's
// whole traffic (8K x 64 at gamma 6: 134 MB of fp16), so loads are made wide and
// several kept in flight (the head loop unrolled). VEC 4 needs cap_stride a
// multiple of 4 and an aligned base; candidates outside [head, mid_end) in a
// vector are read but not written.
template <int VEC>
__device__ void score_middle(const KvSelectParams &p, const KvSelectDesc &d, int layer, int mid_end,
                             uint32_t *keys) {
  using Vec = typename std::conditional<VEC == 4, uint2, f16>::type;  // VEC fp16 scores
  const int lines = (d.n_rows > 0 ? d.n_rows : 1) * p.n_heads;
  const float inv = 1.0f / static_cast<float>(lines);
  const int64_t layer_lines = static_cast<int64_t>(layer) * p.cap_slots * p.n_heads;
  const int first = d.head / VEC * VEC;
  for (int v = first + threadIdx.x * VEC; v < mid_end; v += kThreads * VEC) {
    float sum[VEC] = {};
    for (int r = 0; r < d.n_rows; ++r) {
      const int64_t line0 = layer_lines + static_cast<int64_t>(d.first_slot + r) * p.n_heads;
#pragma unroll 4
      for (int h = 0; h < p.n_heads; ++h) {
        const Vec x = *reinterpret_cast<const Vec *>(p.cap_logits + (line0 + h) * p.cap_stride + v);
        float xs[VEC];
        const f16 *xh = reinterpret_cast<const f16 *>(&x);
#pragma unroll
        for (int e = 0; e < VEC; ++e) xs[e] = __half2float(xh[e]);
        const float lse = d.weight ? p.cap_lse[line0 + h] : 0.0f;
#pragma unroll
        for (int e = 0; e < VEC; ++e) sum[e] += d.weight ? __expf(xs[e] - lse) : xs[e];
      }
    }
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      if (v + e >= d.head && v + e < mid_end) keys[v + e] = order_key(sum[e] * inv);
  }
}

__global__ void __launch_bounds__(kThreads) kv_select_kernel(KvSelectParams p) {
  pdl_enter();
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
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
  const int m = mid_end - d.head;                  // scored range [head, mid_end)
  const bool rank = d.scored > 0 && d.scored < m;  // else all or none of the middle

  // 1. Scores of the middle, as keys.
  if (rank) {
    const bool aligned =
        p.cap_stride % 4 == 0 && reinterpret_cast<uintptr_t>(p.cap_logits) % 8 == 0;
    if (aligned)
      score_middle<4>(p, d, layer, mid_end, keys);
    else
      score_middle<1>(p, d, layer, mid_end, keys);
  }

  // 2. Radix select: the key T of the scored-th best, how many of the chosen
  // equal T (taken latest first) and how many keys equal T in all. `rank` is
  // the same for the whole block.
  RadixPick pick;
  pick.take_equal = d.scored;
  if (rank) pick = block_radix_select<kThreads>(keys, d.head, mid_end, d.scored, radix);
  const uint32_t threshold = pick.threshold;
  const int take_equal = pick.take_equal, n_equal = pick.n_equal;
  // Block-uniform: without ties at T every key equal to it is kept, and the
  // compaction needs one block scan per chunk instead of two.
  const bool some_equal_dropped = rank && take_equal < n_equal;

  // 3. Ordered compaction over [0, n): keep the head, the tail, keys above T,
  // and the last take_equal of the keys equal to T.
  int written = 0, equal_seen = 0;
  for (int base = 0; base < n; base += kThreads) {
    const int pos = base + threadIdx.x;
    bool keep = false, equal = false;
    if (pos < n) {
      if (pos < d.head || pos >= mid_end) {
        keep = true;
      } else if (!rank) {
        keep = d.scored >= m;
      } else {
        const uint32_t k = keys[pos];
        keep = k > threshold || (!some_equal_dropped && k == threshold);
        equal = k == threshold;
      }
    }
    int equal_chunk = 0;
    if (some_equal_dropped) {  // which of the keys equal to T are the last take_equal
      int equal_before;
      Scan(scan_tmp).ExclusiveSum(equal ? 1 : 0, equal_before, equal_chunk);
      __syncthreads();
      if (equal && equal_seen + equal_before >= n_equal - take_equal) keep = true;
    }
    int keep_before, keep_chunk;
    Scan(scan_tmp).ExclusiveSum(keep ? 1 : 0, keep_before, keep_chunk);
    __syncthreads();
    if (keep) out[written + keep_before] = pos;
    written += keep_chunk;
    equal_seen += equal_chunk;
  }
}

}  // namespace

cudaError_t kv_select(const KvSelectParams &p, cudaStream_t stream) {
  if (p.n_seqs == 0) return cudaSuccess;
  if (p.desc == nullptr || p.records == nullptr || p.n_layers <= 0 || p.n_seqs < 0 ||
      p.n_heads <= 0 || p.keys == nullptr || p.key_stride < 0)
    return cudaErrorInvalidValue;
  return launch_kernel(kv_select_kernel, p.n_seqs * p.n_layers, kThreads, 0, stream, p);
}

}  // namespace vegas::kernels
