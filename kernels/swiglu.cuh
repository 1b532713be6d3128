// SwiGLU on the fused gate|up GEMM output: out = silu(gate) * up, bf16 in and
// out, f32 arithmetic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_utils.cuh"

namespace vegas::kernels {

struct SwigluParams {
  const bf16 *gate_up = nullptr;  // [rows][2 * inter]: gate in [0, inter), up in [inter, 2*inter)
  bf16 *out = nullptr;            // [rows][inter]
  int32_t rows = 0;
  int32_t inter = 0;
};

cudaError_t swiglu(const SwigluParams &p, cudaStream_t stream);

#if defined(__CUDACC__)
// silu(gate) * up as bf16: the one formula of swiglu() and of the GEMVs that
// fuse it (quant_gemv's SwiGLU epilogue), so that both give the same bits.
__device__ __forceinline__ bf16 swiglu_value(float gate, float up) {
  return __float2bfloat16(gate / (1.0f + __expf(-gate)) * up);
}
#endif

}  // namespace vegas::kernels
