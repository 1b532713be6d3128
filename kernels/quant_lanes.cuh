// Device helpers the quant_gemv kernels share (quant_gemv.cu, quant_gemv_k.cu).
#pragma once

#include "cuda_utils.cuh"

namespace vegas::kernels::quant_lanes {

// Byte `i` of u as a float 2^23 + byte (selector: byte i, zeros, 0x4b).
__device__ __forceinline__ float magic_byte(uint32_t u, int i) {
  return __int_as_float(__byte_perm(u, 0x4b000000u, 0x7440u + i));
}

// The two bf16 of a 32-bit word as floats.
__device__ __forceinline__ float bf16_lo(uint32_t w) {
  return __int_as_float(w << 16);
}
__device__ __forceinline__ float bf16_hi(uint32_t w) {
  return __int_as_float(w & 0xffff0000u);
}

// Input values [v0, v0 + 4 * n4) of one row as floats, n4 float4s.
template <int N4>
__device__ __forceinline__ void load_x(const bf16 *x, float4 (&out)[N4]) {
#pragma unroll
  for (int i = 0; i < N4; i += 2) {
    const uint4 u = __ldg(reinterpret_cast<const uint4 *>(x) + i / 2);
    out[i] = make_float4(bf16_lo(u.x), bf16_hi(u.x), bf16_lo(u.y), bf16_hi(u.y));
    out[i + 1] = make_float4(bf16_lo(u.z), bf16_hi(u.z), bf16_lo(u.w), bf16_hi(u.w));
  }
}

__device__ __forceinline__ float dot4(const float4 &x, float a, float b, float c, float d,
                                      float acc) {
  return fmaf(x.x, a, fmaf(x.y, b, fmaf(x.z, c, fmaf(x.w, d, acc))));
}

}  // namespace vegas::kernels::quant_lanes
