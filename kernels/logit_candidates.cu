#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda_utils.cuh"
#include "logit_candidates.cuh"

namespace vegas::kernels {

namespace {

constexpr int kThreads = 512;
constexpr int kDigitBits = 8;
constexpr int kDigits = 1 << kDigitBits;
constexpr int kDigitsPerLane = kDigits / 32;

// Unsigned keys in the order of the floats (-0 counted as +0, as the host's
// float comparisons do; NaN never reaches here).
__device__ __forceinline__ uint32_t order_key(float v) {
  uint32_t b = __float_as_uint(v);
  if ((b << 1) == 0) b = 0;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// ITEMS > 0: thread t keeps logits [t * ITEMS, (t + 1) * ITEMS) in registers,
// read once, padded with -inf past the vocabulary (which every pass skips),
// for vocabularies up to ITEMS * kThreads: each of the six passes over the
// row then costs no memory round trip (22m's 8192: 18.8 us a launch of 16
// rows before, ncu on the H200). ITEMS = 0: every pass reads the row.
template <int ITEMS>
__global__ void __launch_bounds__(kThreads) candidates_kernel(CandidateParams p) {
  pdl_enter();
  using Reduce = cub::BlockReduce<int32_t, kThreads>;
  using Scan = cub::BlockScan<int32_t, kThreads>;
  __shared__ union {
    typename Reduce::TempStorage reduce;
    typename Scan::TempStorage scan;
  } temp;
  __shared__ int32_t hist[kDigits];
  __shared__ int32_t finite_all;
  __shared__ uint32_t found_prefix;
  __shared__ int32_t found_remaining;
  const int row = blockIdx.x;
  const float *l = p.logits + static_cast<int64_t>(row) * p.vocab;

  float v[ITEMS > 0 ? ITEMS : 1];
  const int first = static_cast<int>(threadIdx.x) * ITEMS;
  if constexpr (ITEMS > 0) {
    if (ITEMS % 4 == 0 && (p.vocab & 3) == 0) {  // rows 16-byte aligned: whole float4s in or out
#pragma unroll
      for (int q = 0; q < ITEMS / 4; ++q) {
        const float4 x = first + 4 * q < p.vocab
                             ? *reinterpret_cast<const float4 *>(l + first + 4 * q)
                             : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        v[4 * q] = x.x, v[4 * q + 1] = x.y, v[4 * q + 2] = x.z, v[4 * q + 3] = x.w;
      }
    } else {
#pragma unroll
      for (int e = 0; e < ITEMS; ++e) v[e] = first + e < p.vocab ? l[first + e] : -INFINITY;
    }
  }
  // f(id, logit) over this thread's logits: its registers, or the row strided.
  auto for_each = [&](auto &&f) {
    if constexpr (ITEMS > 0) {
#pragma unroll
      for (int e = 0; e < ITEMS; ++e) f(first + e, v[e]);
    } else {
      for (int i = threadIdx.x; i < p.vocab; i += kThreads) f(i, l[i]);
    }
  };
  // f(id, logit) over a contiguous range of ids per thread, ascending (the
  // compaction's order); padding past the vocabulary is -inf.
  auto for_each_in_order = [&](auto &&f) {
    if constexpr (ITEMS > 0) {
#pragma unroll
      for (int e = 0; e < ITEMS; ++e) f(first + e, v[e]);
    } else {
      const int chunk = (p.vocab + kThreads - 1) / kThreads;
      const int begin = min(p.vocab, static_cast<int>(threadIdx.x) * chunk);
      const int end = min(p.vocab, begin + chunk);
      for (int i = begin; i < end; ++i) f(i, l[i]);
    }
  };

  // NaN / +inf, and the finite count.
  int32_t finite = 0, bad = 0;
  for_each([&](int, float x) {
    bad |= !(x < INFINITY);
    finite += x > -INFINITY;
  });
  const int32_t finite_sum = Reduce(temp.reduce).Sum(finite);
  if (threadIdx.x == 0) finite_all = finite_sum;
  bad = __syncthreads_or(bad);
  if (bad || finite_all == 0) {
    if (threadIdx.x == 0) p.count[row] = kCandidatesBadRow;
    return;
  }

  // Radix descent to the key of the k-th largest finite logit: `remaining` is
  // its rank among the keys that match `prefix` on the digits found so far.
  uint32_t prefix = 0, mask = 0;
  int32_t remaining = min(max(p.k[row], 1), finite_all);
  for (int shift = 32 - kDigitBits; shift >= 0; shift -= kDigitBits) {
    for (int d = threadIdx.x; d < kDigits; d += kThreads) hist[d] = 0;
    __syncthreads();
    for_each([&](int, float x) {
      if (x == -INFINITY) return;
      const uint32_t key = order_key(x);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & (kDigits - 1)], 1);
    });
    __syncthreads();
    if (threadIdx.x < 32) {
      // Lane j holds digits kDigits-1-j*8 down to kDigits-8-j*8 (lane 0 the
      // highest); the first lane whose inclusive count from the top reaches
      // `remaining` walks its digits.
      const int lane = threadIdx.x, top = kDigits - 1 - lane * kDigitsPerLane;
      int32_t mine = 0;
#pragma unroll
      for (int j = 0; j < kDigitsPerLane; ++j) mine += hist[top - j];
      int32_t incl = mine;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int32_t up = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += up;
      }
      const unsigned reached = __ballot_sync(0xffffffffu, incl >= remaining);
      if (lane == __ffs(reached) - 1) {
        int32_t above = incl - mine;
        int d = top;
        for (int j = 0; j < kDigitsPerLane - 1; ++j, --d) {
          if (above + hist[d] >= remaining) break;
          above += hist[d];
        }
        found_prefix = prefix | (static_cast<uint32_t>(d) << shift);
        found_remaining = remaining - above;
      }
    }
    __syncthreads();
    prefix = found_prefix;
    remaining = found_remaining;
    mask |= static_cast<uint32_t>(kDigits - 1) << shift;
  }
  const uint32_t threshold = prefix;  // every digit found: the k-th largest key

  // Compaction in id order: each thread's contiguous range, one block scan.
  auto is_candidate = [&](float x) { return x != -INFINITY && order_key(x) >= threshold; };
  int32_t mine = 0;
  for_each_in_order([&](int, float x) { mine += is_candidate(x); });
  int32_t at = 0, total = 0;
  Scan(temp.scan).ExclusiveSum(mine, at, total);
  if (total > p.cap) {
    if (threadIdx.x == 0) p.count[row] = kCandidatesOverflow;
    return;
  }
  const int64_t out = static_cast<int64_t>(row) * p.cap;
  for_each_in_order([&](int i, float x) {
    if (!is_candidate(x)) return;
    p.ids[out + at] = i;
    p.values[out + at] = x;
    ++at;
  });
  if (threadIdx.x == 0) p.count[row] = total;
}

}  // namespace

cudaError_t logit_candidates(const CandidateParams &p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.rows < 0 || p.vocab <= 0 || p.cap < 1 || p.logits == nullptr || p.k == nullptr ||
      p.count == nullptr || p.ids == nullptr || p.values == nullptr)
    return cudaErrorInvalidValue;
  constexpr int kItems = 16;  // registers a thread: vocabularies up to 8192
  static const bool registers = variant_enabled("VEGAS_CUDA_CANDIDATES_IN_REGISTERS");
  if (registers && p.vocab <= kItems * kThreads)
    return launch_kernel(candidates_kernel<kItems>, p.rows, kThreads, 0, stream, p);
  return launch_kernel(candidates_kernel<0>, p.rows, kThreads, 0, stream, p);
}

}  // namespace vegas::kernels
