// small_gemm on the tensor cores: each 16 rows are one m16n8k16 A tile, and
// blockIdx.y picks the tile (up to kSmallGemmMmaMaxRows rows: the weights a
// block streams are read by every row tile, from L2 after the first).
// The K dimension is cut across the warps of a block (128 inputs each), so a
// warp holds its slice of the (normalised) rows in registers as A fragments
// and only streams weights: a block covers 16 output columns (8 for SwiGLU,
// whose gate and up rows sit in the same block) and adds its warps' partial
// tiles in shared memory before the epilogue. The weights do not depend on the
// previous kernel, so they are requested before waiting for it (PDL).
// Fragments come straight from global memory (small_gemm_fragments.cuh): the
// k order inside an mma is free as long as A and B agree, so inputs
// 8t+{0,1}, 8t+{2,3} feed one k16 step and 8t+{4,5}, 8t+{6,7} the next.
#include "small_gemm_fragments.cuh"

namespace vegas::kernels {

namespace {

constexpr int kChunksPerWarp = 4;  // 128 inputs per warp
constexpr int kMaxWarps = kSmallGemmMmaMaxK / (kSmallGemmChunk * kChunksPerWarp);
constexpr int kColsPerBlock = 16;  // two n8 tiles

__global__ void __launch_bounds__(kMaxWarps * 32) small_gemm_mma_kernel(SmallGemmParams all) {
  const SmallGemmParams p = small_gemm_row_tile(all, blockIdx.y);
  __shared__ float ss_part[kMaxWarps][kSmallGemmTileRows];  // [warp][row] sums of squares
  __shared__ __align__(16) bf16 norm_s[kSmallGemmMmaMaxK];
  __shared__ float4 tile_part[kMaxWarps][2][32];  // [warp][n8 tile][lane] accumulators
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_warps = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const bool swiglu = p.epilogue == SmallGemmParams::Epilogue::kSwiglu;
  const int k = p.k;
  const int rows[2] = {g, g + 8};

  // Weight rows of the two n8 tiles: columns col0 + 8j + g, or for SwiGLU the
  // gate (j = 0) and up (j = 1) rows of output column col0 + g.
  const int col0 = blockIdx.x * (swiglu ? 8 : kColsPerBlock);
  const bf16 *wrow[2];
  bool wvalid[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int col = swiglu ? col0 + g : col0 + 8 * j + g;
    wvalid[j] = col < p.n;
    const int r = swiglu && j == 1 ? p.n + col : col;
    wrow[j] = p.w + static_cast<int64_t>(wvalid[j] ? r : 0) * k;
  }
  uint4 wf[2][kChunksPerWarp];
#pragma unroll
  for (int c = 0; c < kChunksPerWarp; ++c) {
    const int kk = small_gemm_input<kChunksPerWarp>(warp, c, t);
#pragma unroll
    for (int j = 0; j < 2; ++j) wf[j][c] = load16_or_zero(wrow[j] + kk, wvalid[j] && kk < k);
  }
  small_gemm_stage_norm<kChunksPerWarp>(p, warp, lane, norm_s);
  pdl_wait();  // the rows below come from the previous kernel
  pdl_launch_dependents();

  // kAddF32: warp 0's outputs' current values, requested now so that the
  // epilogue's read-modify-write does not add a round trip after the sums.
  float old[2][2][2] = {};  // [row i][tile j][column e]
  const bool add = p.epilogue == SmallGemmParams::Epilogue::kAddF32;
  if (add && warp == 0)
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = col0 + 8 * j + 2 * t + e;
          if (rows[i] < p.m && col < p.n) old[i][j][e] = p.y_f32[int64_t{rows[i]} * p.n + col];
        }

  uint4 xa[2][kChunksPerWarp];
  small_gemm_a_fragments<kChunksPerWarp>(p, warp, n_warps, lane, ss_part, norm_s, xa);

  float acc[2][4];
  small_gemm_mma_chunks<kChunksPerWarp, 2>(xa, wf, acc);
#pragma unroll
  for (int j = 0; j < 2; ++j)
    tile_part[warp][j][lane] = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    float4 s = tile_part[0][j][lane];
    for (int w = 1; w < n_warps; ++w) {
      const float4 o = tile_part[w][j][lane];
      s.x += o.x, s.y += o.y, s.z += o.z, s.w += o.w;
    }
    acc[j][0] = s.x, acc[j][1] = s.y, acc[j][2] = s.z, acc[j][3] = s.w;
  }

  // Accumulator (j): rows g (0, 1) and g + 8 (2, 3), tile columns 2t, 2t + 1.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = rows[i];
    if (row >= p.m) continue;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (swiglu) {
        const int col = col0 + 2 * t + e;
        if (col >= p.n) continue;
        small_gemm_store_swiglu(p, static_cast<int64_t>(row) * p.n + col, acc[0][2 * i + e],
                                acc[1][2 * i + e]);
        continue;
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int col = col0 + 8 * j + 2 * t + e;
        if (col >= p.n) continue;
        const int64_t at = static_cast<int64_t>(row) * p.n + col;
        if (add)
          p.y_f32[at] = old[i][j][e] + acc[j][2 * i + e];
        else
          small_gemm_store(p, at, acc[j][2 * i + e]);
      }
    }
  }
}

}  // namespace

cudaError_t small_gemm_mma(const SmallGemmParams &p, cudaStream_t stream) {
  const bool swiglu = p.epilogue == SmallGemmParams::Epilogue::kSwiglu;
  const int per_block = swiglu ? 8 : kColsPerBlock;
  const unsigned blocks = static_cast<unsigned>((p.n + per_block - 1) / per_block);
  const int warps =
      (p.k + kSmallGemmChunk * kChunksPerWarp - 1) / (kSmallGemmChunk * kChunksPerWarp);
  const dim3 grid(blocks, small_gemm_row_tiles(p.m));
  return launch_kernel(small_gemm_mma_kernel, grid, warps * 32, 0, stream, p);
}

}  // namespace vegas::kernels
