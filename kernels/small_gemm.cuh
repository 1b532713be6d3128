// Linear layers for a few rows (decoding, drafting): Y[M][N] = f(X)[M][K] ·
// W[N][K]ᵀ with bf16 weights (HF Linear layout) and f32 accumulation, M <= 16
// (512 on the tensor-core kernel, in 16-row tiles).
// At such M a step is a chain of small launches, so this kernel also absorbs
// the ones around the GEMM: the RMSNorm of its input (prologue) and the
// residual add or SwiGLU after it (epilogue), with the same bf16 roundings as
// the separate rmsnorm / swiglu kernels and cuBLASLt path it replaces.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_utils.cuh"

namespace vegas::kernels {

constexpr int kSmallGemmMaxRows = 16;      // the CUDA-core kernel
constexpr int kSmallGemmTileRows = 16;     // the tensor-core kernels' row tile: one m16 A tile
constexpr int kSmallGemmMmaMaxRows = 512;  // the tensor-core kernel: 32 row tiles
constexpr int kSmallGemmMaxK = 4096;       // the staged input: M x K bf16 in shared memory

struct SmallGemmParams {
  // Input: bf16 x_bf16[M][K], or f32 x_f32[M][K] normalised on the fly:
  // bf16(x * rsqrt(mean(x^2) + eps) * norm_weight), as kernels::rmsnorm does.
  const bf16 *x_bf16 = nullptr;
  const float *x_f32 = nullptr;
  const bf16 *norm_weight = nullptr;  // with x_f32
  // Optional, with x_f32: input row m is x_f32 row x_row_index[m] (the lm_head
  // reads only the rows whose logits were asked for).
  const int32_t *x_row_index = nullptr;
  float eps = 1e-6f;
  const bf16 *w = nullptr;  // [N][K], or [2 N][K] (gate rows, then up rows) for kSwiglu
  int32_t m = 0;
  int32_t n = 0;  // outputs per row
  int32_t k = 0;
  enum class Epilogue { kStoreBf16, kAddF32, kSwiglu, kStoreF32 } epilogue = Epilogue::kStoreBf16;
  bf16 *y_bf16 = nullptr;  // kStoreBf16, kSwiglu: [M][N]
  float *y_f32 = nullptr;  // kAddF32: [M][N] += result; kStoreF32: [M][N] = result
};

// The tensor-core kernels' row tiles for m rows (their grids' y extent).
inline unsigned small_gemm_row_tiles(int32_t m) {
  return static_cast<unsigned>((m + kSmallGemmTileRows - 1) / kSmallGemmTileRows);
}

// Column tiles per block of the tensor-core kernel for a grid of col_tiles x
// row_tiles tiles: every column block re-reads (and re-normalises) its row
// tile's inputs, which at 112 rows x 8192 logits was most of the lm_head's
// time, so with several row tiles a block takes up to 4 column tiles while the
// grid keeps at least two blocks per multiprocessor. VEGAS_CUDA_GEMM_TILES=N
// sets the most per block (1: one tile per block, for A/B timing).
int small_gemm_tiles_per_block(int col_tiles, int row_tiles);

// Whether the shape fits (M rows, K inputs): up to kSmallGemmMaxRows rows, or
// kSmallGemmMmaMaxRows where K takes the tensor-core kernel; else use cuBLASLt.
bool small_gemm_supports(int32_t m, int32_t k);

// The tensor-core kernel for K <= kSmallGemmMmaMaxK (small_gemm_mma.cu);
// small_gemm() picks it by itself, larger K take the CUDA-core kernel.
cudaError_t small_gemm(const SmallGemmParams &p, cudaStream_t stream);
constexpr int kSmallGemmMmaMaxK = 2048;
cudaError_t small_gemm_mma(const SmallGemmParams &p, cudaStream_t stream);
// small_gemm_mma's kernel for two or more row tiles, with `tiles` column tiles
// a block (0: its own choice; else 1 .. 8, at most two per warp of 128
// inputs), for tests and timing; small_gemm_mma calls it by itself.
cudaError_t small_gemm_staged(const SmallGemmParams &p, cudaStream_t stream, int tiles);
// Whether small_gemm_staged takes `tiles` column tiles a block at this K
// (one and two always, for K up to kSmallGemmMmaMaxK).
bool small_gemm_staged_supports(int32_t k, int tiles);
cudaError_t small_gemm_mma_init();  // small_gemm_init calls it

#if defined(__CUDACC__)
// The epilogue of both kernels (small_gemm.cu, small_gemm_mma.cu): output
// element `at` of y from its f32 sum, or for SwiGLU from the gate and up sums,
// each rounded to bf16 first as the GEMM + swiglu kernels do.
__device__ __forceinline__ void small_gemm_store(const SmallGemmParams &p, int64_t at, float v) {
  if (p.epilogue == SmallGemmParams::Epilogue::kAddF32)
    p.y_f32[at] += v;
  else if (p.epilogue == SmallGemmParams::Epilogue::kStoreF32)
    p.y_f32[at] = v;
  else
    p.y_bf16[at] = __float2bfloat16(v);
}
__device__ __forceinline__ void small_gemm_store_swiglu(const SmallGemmParams &p, int64_t at,
                                                        float gate_sum, float up_sum) {
  const float g = __bfloat162float(__float2bfloat16(gate_sum));
  const float u = __bfloat162float(__float2bfloat16(up_sum));
  p.y_bf16[at] = __float2bfloat16(g / (1.0f + __expf(-g)) * u);
}
#endif

// Sets the kernels' shared-memory limit; call once per device, outside capture.
cudaError_t small_gemm_init();

}  // namespace vegas::kernels
