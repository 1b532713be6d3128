// The benchmarks' names of the synthetic weight formats (VEGAS_BENCH_WEIGHTS,
// VEGAS_PHASE_WEIGHTS): bf16, q8_0, q4_0, q4_k, q5_k, q6_k, q4_k_m, q5_k_m,
// fp8; anything else is bf16.
#pragma once

#include <string>

#include "backend/cuda/cuda_backend.h"

namespace vegas::bench {

inline CudaBackendOptions::SyntheticWeights synthetic_weights_named(const std::string &f) {
  using W = CudaBackendOptions::SyntheticWeights;
  return f == "q8_0"     ? W::kQ8_0
         : f == "q4_0"   ? W::kQ4_0
         : f == "q4_k"   ? W::kQ4_K
         : f == "q5_k"   ? W::kQ5_K
         : f == "q6_k"   ? W::kQ6_K
         : f == "q4_k_m" ? W::kQ4_K_M
         : f == "q5_k_m" ? W::kQ5_K_M
         : f == "fp8"    ? W::kF8
                         : W::kBf16;
}

}  // namespace vegas::bench
