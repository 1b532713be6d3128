// Block-wide top-k threshold by radix select, shared by the selection kernels
// (kv_select.cu over candidate positions, quest_select.cu over KV pages).
//
// Scores become order-preserving 32-bit keys (a larger float gives a larger
// key, NaN ranks as -inf), kept in global scratch by the caller. Four passes
// of 8-bit histograms find the key T of the want-th largest key, how many keys
// equal T (n_equal) and how many of those the top `want` takes (take_equal).
// The caller keeps keys > T and, of the keys equal to T, the last take_equal
// by index (ties prefer the later index: select/top_k_select.h's ranking).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace vegas::kernels {

#if defined(__CUDACC__)

__device__ __forceinline__ uint32_t order_key(float v) {
  if (v != v) v = -INFINITY;
  const uint32_t u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

struct RadixPick {
  uint32_t threshold = 0;
  int take_equal = 0;
  int n_equal = 0;
};

// The block's shared state (declare one `__shared__ RadixShared`).
struct RadixShared {
  static constexpr int kBits = 8;
  static constexpr int kBins = 1 << kBits;
  int hist[kBins];
  uint32_t prefix;
  int remaining, total;
};

// The bin of the want-th largest key among 256 bin counts (hist), from the
// top: the bin where the count from bin 255 down first reaches `want`; bin 0
// when it never does. Warp 0 only: each lane sums 8 bins, a shuffle scan
// finds the lane, the lane its bin (one thread walking 256 shared counts took
// microseconds a pass). Writes prefix | bin << shift, the want left inside
// the bin and the bin's count into sh.
__device__ __forceinline__ void radix_pick_bin(RadixShared &sh, uint32_t prefix, int shift) {
  const int lane = threadIdx.x & 31;
  constexpr int kPer = RadixShared::kBins / 32;
  int c[kPer], sum = 0;
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    c[e] = sh.hist[RadixShared::kBins - 1 - kPer * lane - e];
    sum += c[e];
  }
  int incl = sum;
#pragma unroll
  for (int off = 1; off < 32; off *= 2) {
    const int v = __shfl_up_sync(0xffffffffu, incl, off);
    if (lane >= off) incl += v;
  }
  const int want = sh.remaining, excl = incl - sum;
  __syncwarp();  // every lane has read sh.remaining before one rewrites it
  if ((excl < want && want <= incl) || (lane == 31 && want > incl)) {
    int r = want - excl, e = 0;
    while (e < kPer - 1 && c[e] < r) r -= c[e++];
    sh.prefix = prefix | (static_cast<uint32_t>(RadixShared::kBins - 1 - kPer * lane - e) << shift);
    sh.remaining = r;  // to take among keys with this prefix
    sh.total = c[e];
  }
}

// Every thread of the block calls it with the same arguments, 0 < want <
// end - begin. Begins with a barrier, so keys written by other threads of the
// block just before are seen.
template <int kThreads>
__device__ RadixPick block_radix_select(const uint32_t *keys, int begin, int end, int want,
                                        RadixShared &sh) {
  if (threadIdx.x == 0) {
    sh.prefix = 0;
    sh.remaining = want;
    sh.total = 0;
  }
  __syncthreads();
  uint32_t mask = 0;
  for (int shift = 32 - RadixShared::kBits; shift >= 0; shift -= RadixShared::kBits) {
    for (int i = threadIdx.x; i < RadixShared::kBins; i += kThreads) sh.hist[i] = 0;
    __syncthreads();
    const uint32_t prefix = sh.prefix;
    // Plain shared atomics: combining the lanes of a bin first
    // (__match_any_sync) was slower, though one kind of score shares its top bits.
    for (int i = begin + threadIdx.x; i < end; i += kThreads) {
      const uint32_t k = keys[i];
      if ((k & mask) == prefix) atomicAdd(&sh.hist[(k >> shift) & (RadixShared::kBins - 1)], 1);
    }
    __syncthreads();
    if (threadIdx.x < 32) radix_pick_bin(sh, prefix, shift);
    __syncthreads();
    mask |= static_cast<uint32_t>(RadixShared::kBins - 1) << shift;
  }
  RadixPick pick;
  pick.threshold = sh.prefix;
  pick.take_equal = sh.remaining;
  pick.n_equal = sh.total;
  return pick;
}

#endif  // __CUDACC__

}  // namespace vegas::kernels
