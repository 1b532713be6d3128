// Deterministic pseudo-random bf16 fill on the device (synthetic benchmark
// weights): element i = offset + scale * u(seed, i), u uniform in [-1, 1),
// from a counter hash, so a tensor depends only on (seed, its size). The same
// as f16 (out_f16) or f32 (out_f32), or uniform random bytes (out_bytes:
// quantized values; byte_mask clears bits, e.g. e4m3's NaN codes).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_utils.cuh"

namespace vegas::kernels {

struct RandomFillParams {
  bf16 *out = nullptr;  // one of out, out_f16, out_f32, out_bytes
  f16 *out_f16 = nullptr;
  float *out_f32 = nullptr;
  uint8_t *out_bytes = nullptr;
  uint8_t byte_mask = 0xff;
  int64_t n = 0;
  uint64_t seed = 0;
  float scale = 1.0f;
  float offset = 0.0f;
};

cudaError_t random_fill(const RandomFillParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
