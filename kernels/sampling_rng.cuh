// The host Rng (runtime/sampling/rng.cpp) on the device: SplitMix64's
// finaliser over a seed-derived key, top 53 bits scaled to [0, 1). Draw
// `counter` of `seed` equals the host's, so device sampling picks the host's
// token for the same distribution.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace vegas::kernels {

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

__device__ __forceinline__ double uniform(uint64_t seed, uint64_t counter) {
  const uint64_t key = mix64(seed ^ 0x5851f42d4c957f2dULL);
  const uint64_t h = mix64(key + (counter + 1) * 0x9e3779b97f4a7c15ULL);
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

}  // namespace vegas::kernels
