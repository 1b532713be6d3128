// Weights kept in a 32-value block format (llama.cpp's Q8_0 and Q4_0, repacked
// so that the quantized values and the scales are two aligned arrays):
//   Q8_0: value = scale * q, q int8, one byte per value;
//   Q4_0: value = scale * (q - 8), q 4-bit; in each block's 16 bytes, byte j
//         holds value j in its low nibble and value j + 16 in its high one.
// quant_gemv multiplies a few bf16 rows by such a matrix reading each weight
// byte once (decoding: the step is the weight bytes); quant_dequantize writes
// it out as bf16 for the steps of many rows, which take cuBLASLt.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_utils.cuh"

namespace vegas::kernels {

enum class QuantFormat : int32_t { kQ8_0 = 0, kQ4_0 = 1 };

constexpr int kQuantBlock = 32;       // values per scale
constexpr int kQuantGemvMaxRows = 8;  // quant_gemv's input rows

__host__ __device__ constexpr int64_t quant_row_bytes(QuantFormat f, int64_t k) {
  return f == QuantFormat::kQ8_0 ? k : k / 2;
}

// quant_gemv's K must be a multiple of this: one warp step (32 lanes x 16 bytes).
constexpr int32_t quant_gemv_k_align(QuantFormat f) {
  return f == QuantFormat::kQ8_0 ? 512 : 1024;
}

// A [n][k] matrix (HF Linear layout: n outputs of k inputs).
struct QuantMatrix {
  QuantFormat format = QuantFormat::kQ8_0;
  const uint8_t *qs = nullptr;  // [n][quant_row_bytes(format, k)]
  const f16 *scales = nullptr;  // [n][k / 32]
  int32_t n = 0;
  int32_t k = 0;
};

struct QuantGemvParams {
  QuantMatrix w;
  const bf16 *x = nullptr;  // [m][k]
  int32_t m = 0;
  // y[m][n]: f32 (stored, or added to with `accumulate`) or bf16.
  float *y_f32 = nullptr;
  bf16 *y_bf16 = nullptr;
  bool accumulate = false;
};

// m in [1, kQuantGemvMaxRows] and k a multiple of quant_gemv_k_align(f).
bool quant_gemv_supports(QuantFormat f, int32_t m, int32_t k);
cudaError_t quant_gemv(const QuantGemvParams &p, cudaStream_t stream);

struct QuantDequantizeParams {
  QuantMatrix w;
  bf16 *out = nullptr;  // [n][k], bf16(scale * q) rounded to nearest even
};
cudaError_t quant_dequantize(const QuantDequantizeParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
