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
    for (int i = begin + threadIdx.x; i < end; i += kThreads) {
      const uint32_t k = keys[i];
      if ((k & mask) == prefix) atomicAdd(&sh.hist[(k >> shift) & (RadixShared::kBins - 1)], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int remaining = sh.remaining, bin = RadixShared::kBins - 1;
      while (bin > 0 && sh.hist[bin] < remaining) remaining -= sh.hist[bin--];
      sh.prefix = prefix | (static_cast<uint32_t>(bin) << shift);
      sh.remaining = remaining;  // to take among keys with this prefix
      sh.total = sh.hist[bin];
    }
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
