// RMSNorm of the f32 residual stream into bf16 (the next GEMM's input):
// out[i] = bf16(x[src_row] * rsqrt(mean(x^2) + eps) * weight). The residual
// add itself is fused into the preceding GEMM (cuBLASLt, beta = 1), so this
// kernel reads the already-summed residual. `row_index` (optional) gathers
// rows, which the final norm uses to normalise only the rows that need logits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_utils.cuh"

namespace vegas::kernels {

struct RmsNormParams {
  const float *x = nullptr;            // [*][hidden]
  const int32_t *row_index = nullptr;  // [rows] source row of each output row, or null
  const bf16 *weight = nullptr;        // [hidden]
  bf16 *out = nullptr;                 // [rows][hidden]
  int32_t rows = 0;
  int32_t hidden = 0;
  float eps = 1e-6f;
};

cudaError_t rmsnorm(const RmsNormParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
