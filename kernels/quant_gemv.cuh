// Weights kept in llama.cpp's block formats. Q8_0 and Q4_0 (32-value blocks)
// are repacked so that the quantized values and the scales are two aligned
// arrays:
//   Q8_0: value = scale * q, q int8, one byte per value;
//   Q4_0: value = scale * (q - 8), q 4-bit; in each block's 16 bytes, byte j
//         holds value j in its low nibble and value j + 16 in its high one.
// The K formats keep 256-value super-blocks (what Q4_K_M and Q5_K_M files
// hold, gguf/ggml_types.cpp has their layouts):
//   Q4_K: GGUF's 144-byte blocks as they are (f16 d, f16 dmin, 12 bytes of
//         6-bit sub-block scales and mins, 128 bytes of nibbles); no scales
//         array;
//   Q6_K: GGUF's ql[128] qh[64] scales[16] as 208 aligned bytes per block,
//         and its f16 d in the scales array (the file's 210-byte blocks would
//         leave every other block off 16-byte alignment).
// FP8 checkpoints keep their codes:
//   F8:   value = scale * e4m3(q), one byte a value, one f32 scale per
//         kF8Group values of a row (in scales_f32: a checkpoint's 128 x 128
//         block scales, or its per-channel or per-tensor scale, repeated).
// quant_gemv multiplies a few bf16 rows by such a matrix reading each weight
// byte once (decoding: the step is the weight bytes); quant_dequantize writes
// it out as bf16 for the steps of many rows, which take cuBLASLt.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_utils.cuh"

namespace vegas::kernels {

enum class QuantFormat : int32_t { kQ8_0 = 0, kQ4_0 = 1, kQ4_K = 2, kQ6_K = 3, kF8 = 4, kQ5_K = 5 };

constexpr int kQuantBlock = 32;           // values per scale of Q8_0 / Q4_0
constexpr int kF8Group = 128;             // values per scale of F8
constexpr int kQuantSuperBlock = 256;     // values per K-format block
constexpr int kQuantGemvMaxRows = 8;      // quant_gemv's input rows (CUDA cores, F8)
constexpr int kQuantGemvMmaMaxRows = 32;  // ... on the tensor cores, every format but F8

__host__ __device__ constexpr bool quant_is_k(QuantFormat f) {
  return f == QuantFormat::kQ4_K || f == QuantFormat::kQ5_K || f == QuantFormat::kQ6_K;
}

// Bytes of one K-format super-block in the `qs` array.
__host__ __device__ constexpr int64_t quant_super_block_bytes(QuantFormat f) {
  return f == QuantFormat::kQ4_K ? 144 : f == QuantFormat::kQ5_K ? 176 : 208;
}

// k must be a multiple of kQuantBlock (kQuantSuperBlock for the K formats,
// kF8Group for F8).
__host__ __device__ constexpr int64_t quant_row_bytes(QuantFormat f, int64_t k) {
  return f == QuantFormat::kQ8_0 || f == QuantFormat::kF8 ? k
         : f == QuantFormat::kQ4_0                        ? k / 2
                                   : k / kQuantSuperBlock * quant_super_block_bytes(f);
}

// f16 entries of the scales array per row.
__host__ __device__ constexpr int64_t quant_row_scales(QuantFormat f, int64_t k) {
  return f == QuantFormat::kQ4_K || f == QuantFormat::kQ5_K || f == QuantFormat::kF8 ? 0
         : f == QuantFormat::kQ6_K ? k / kQuantSuperBlock
                                   : k / kQuantBlock;
}

// f32 entries of the scales_f32 array per row (F8 only).
__host__ __device__ constexpr int64_t quant_row_scales_f32(QuantFormat f, int64_t k) {
  return f == QuantFormat::kF8 ? k / kF8Group : 0;
}

// quant_gemv's K must be a multiple of this: one warp step (32 lanes x 16
// bytes; the K formats: four super-blocks, eight lanes each).
constexpr int32_t quant_gemv_k_align(QuantFormat f) {
  return f == QuantFormat::kQ8_0 || f == QuantFormat::kF8 ? 512 : 1024;
}

// A [n][k] matrix (HF Linear layout: n outputs of k inputs).
struct QuantMatrix {
  QuantFormat format = QuantFormat::kQ8_0;
  const uint8_t *qs = nullptr;        // [n][quant_row_bytes(format, k)]
  const f16 *scales = nullptr;        // [n][quant_row_scales(format, k)] (null: Q4_K, Q5_K, F8)
  const float *scales_f32 = nullptr;  // [n][quant_row_scales_f32(format, k)] (F8 only)
  int32_t n = 0;
  int32_t k = 0;
};

struct QuantGemvParams {
  QuantMatrix w;
  const bf16 *x = nullptr;  // [m][k]
  int32_t m = 0;
  // y[m][ldy] (ldy 0: w.n): f32 (stored, or added to with `accumulate`) or
  // bf16. A wider ldy lets a matrix made of parts in different formats write
  // each part's columns of one output.
  float *y_f32 = nullptr;
  bf16 *y_bf16 = nullptr;
  int32_t ldy = 0;
  bool accumulate = false;
  // Every format (quant_gemv_mma_supports): the tensor-core kernel
  // (quant_gemv_mma.cu) instead of the CUDA-core one. Each gives a row the
  // same sums whatever the row count (quant_gemv_max_rows), but not the same
  // bits as the other (both sum in f32, in different orders). The tensor-core kernel is
  // the faster at four rows, the slower at one.
  bool tensor_cores = false;
  // The SwiGLU epilogue (quant_gemv_swiglu_supports), with swiglu_up.qs set:
  // `w` holds the gate rows and swiglu_up the up rows (same format, n and k),
  // and y_bf16[m][ldy] (ldy 0: n) gets silu(gate) * up of each output's two
  // sums, each first rounded to bf16: the bits swiglu() gives on a bf16
  // gate|up output, without the launch and the round trip between them.
  QuantMatrix swiglu_up;
};

// m in [1, kQuantGemvMaxRows] and k a multiple of quant_gemv_k_align(f).
bool quant_gemv_supports(QuantFormat f, int32_t m, int32_t k);
// The input rows one quant_gemv launch takes for format f with
// QuantGemvParams::tensor_cores as given (VEGAS_CUDA_QUANT_MMA included):
// kQuantGemvMmaMaxRows on the tensor cores but for F8, else kQuantGemvMaxRows.
int quant_gemv_max_rows(QuantFormat f, bool tensor_cores);
// Whether quant_gemv takes QuantGemvParams::swiglu_up for format f.
bool quant_gemv_swiglu_supports(QuantFormat f);
cudaError_t quant_gemv(const QuantGemvParams &p, cudaStream_t stream);

struct QuantDequantizeParams {
  QuantMatrix w;
  bf16 *out = nullptr;  // [n][k], each value as gguf::dequantize makes it, rounded to bf16
};
cudaError_t quant_dequantize(const QuantDequantizeParams &p, cudaStream_t stream);

// Benchmarks: gives every K-format super-block the scale d (and Q4_K's and Q5_K's dmin)
// after a random fill of its bytes, so that the values are finite.
cudaError_t quant_set_super_block_scales(const QuantMatrix &w, float d, float dmin,
                                         cudaStream_t stream);

// Every format on the tensor cores (quant_gemv_mma.cu;
// quant_gemv's launcher when p.tensor_cores, k a multiple of
// quant_gemv_k_align): `split` warps a block (4, 8 or 16), each a slice of
// k, fewer where k is not a multiple of split x 128 (K formats: x 256).
bool quant_gemv_mma_supports(QuantFormat f);
int quant_gemv_mma_max_rows(QuantFormat f);  // 8 for F8, else 32 (two or four n tiles)
cudaError_t quant_gemv_mma(const QuantGemvParams &p, int split, cudaStream_t stream);

// quant_gemv.cu's launchers for the K formats (quant_gemv_k.cu).
cudaError_t quant_gemv_k(const QuantGemvParams &p, cudaStream_t stream);
cudaError_t quant_dequantize_k(const QuantDequantizeParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
