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

  // NaN / +inf, and the finite count.
  int32_t finite = 0, bad = 0;
  for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
    const float v = l[i];
    bad |= !(v < INFINITY);
    finite += v > -INFINITY;
  }
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
    for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
      const float v = l[i];
      if (v == -INFINITY) continue;
      const uint32_t key = order_key(v);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & (kDigits - 1)], 1);
    }
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

  // Compaction in id order: thread t takes ids [t * chunk, (t + 1) * chunk).
  const int chunk = (p.vocab + kThreads - 1) / kThreads;
  const int begin = min(p.vocab, threadIdx.x * chunk), end = min(p.vocab, begin + chunk);
  auto is_candidate = [&](float v) { return v != -INFINITY && order_key(v) >= threshold; };
  int32_t mine = 0;
  for (int i = begin; i < end; ++i) mine += is_candidate(l[i]);
  int32_t at = 0, total = 0;
  Scan(temp.scan).ExclusiveSum(mine, at, total);
  if (total > p.cap) {
    if (threadIdx.x == 0) p.count[row] = kCandidatesOverflow;
    return;
  }
  const int64_t out = static_cast<int64_t>(row) * p.cap;
  for (int i = begin; i < end; ++i) {
    const float v = l[i];
    if (!is_candidate(v)) continue;
    p.ids[out + at] = i;
    p.values[out + at] = v;
    ++at;
  }
  if (threadIdx.x == 0) p.count[row] = total;
}

}  // namespace

cudaError_t logit_candidates(const CandidateParams &p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.rows < 0 || p.vocab <= 0 || p.cap < 1 || p.logits == nullptr || p.k == nullptr ||
      p.count == nullptr || p.ids == nullptr || p.values == nullptr)
    return cudaErrorInvalidValue;
  return launch_kernel(candidates_kernel, p.rows, kThreads, 0, stream, p);
}

}  // namespace vegas::kernels
