// small_gemm on the tensor cores: each 16 rows are one m16n8k16 A tile, and
// blockIdx.y picks the tile (up to kSmallGemmMmaMaxRows rows: the weights a
// block streams are read by every row tile, from L2 after the first).
// The K dimension is cut across the warps of a block (128 inputs each), so a
// warp holds its slice of the (normalised) rows in registers as A fragments
// and only streams weights: a column tile is 16 output columns (8 for SwiGLU,
// whose gate and up rows sit in the same tile), a block takes one or a few
// (small_gemm_tiles_per_block) and adds its warps' partial tiles in shared
// memory before each tile's epilogue. The weights do not depend on the
// previous kernel, so they are requested before waiting for it (PDL).
// Fragments come straight from global memory (small_gemm_fragments.cuh): the
// k order inside an mma is free as long as A and B agree, so inputs
// 8t+{0,1}, 8t+{2,3} feed one k16 step and 8t+{4,5}, 8t+{6,7} the next.
#include <cstdlib>

#include "small_gemm_fragments.cuh"
#include "timeline.cuh"

#if defined(VEGAS_TIMELINE)
VEGAS_TIMELINE_TABLE(tl_gemm_o)
VEGAS_TIMELINE_TABLE(tl_gemm_gu)
VEGAS_TIMELINE_TABLE(tl_gemm_down)
#endif

namespace vegas::kernels {

namespace {

constexpr int kChunksPerWarp = 4;  // 128 inputs per warp
constexpr int kMaxWarps = kSmallGemmMmaMaxK / (kSmallGemmChunk * kChunksPerWarp);
constexpr int kColsPerBlock = 16;  // two n8 tiles

// Weight fragments of column tile `tile` (16 output columns, or 8 for SwiGLU:
// their gate (j = 0) and up (j = 1) rows) for this warp's slice of K.
__device__ __forceinline__ void load_weight_tile(const SmallGemmParams &p, int tile, int warp,
                                                 int lane, uint4 (&wf)[2][kChunksPerWarp]) {
  const bool swiglu = p.epilogue == SmallGemmParams::Epilogue::kSwiglu;
  const int g = lane >> 2, t = lane & 3;
  const int col0 = tile * (swiglu ? 8 : kColsPerBlock);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int col = swiglu ? col0 + g : col0 + 8 * j + g;
    const bool valid = col < p.n;
    const int r = swiglu && j == 1 ? p.n + col : col;
    const bf16 *wrow = p.w + static_cast<int64_t>(valid ? r : 0) * p.k;
#pragma unroll
    for (int c = 0; c < kChunksPerWarp; ++c) {
      const int kk = small_gemm_input<kChunksPerWarp>(warp, c, t);
      wf[j][c] = load16_or_zero(wrow + kk, valid && kk < p.k);
    }
  }
}

// Column tile `tile`'s sums (acc, lane layout of an m16n8 accumulator: rows g
// and g + 8, columns 2t and 2t + 1 of each n8 tile) into y; `old` holds the
// current outputs for kAddF32.
__device__ __forceinline__ void store_tile(const SmallGemmParams &p, int tile, int lane,
                                           const float (&acc)[2][4], const float (&old)[2][2][2]) {
  const bool swiglu = p.epilogue == SmallGemmParams::Epilogue::kSwiglu;
  const bool add = p.epilogue == SmallGemmParams::Epilogue::kAddF32;
  const int g = lane >> 2, t = lane & 3;
  const int col0 = tile * (swiglu ? 8 : kColsPerBlock);
  const int rows[2] = {g, g + 8};
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

// Block (x, y): column tiles x * tiles_per_block .. + tiles_per_block - 1 of
// row tile y. The rows' A fragments (and their RMSNorm) are made once and
// serve every column tile; the next tile's weights are requested as soon as
// the current tile's mma have read theirs. BUFFERS: 2 for several tiles a
// block (partial sums double-buffered), 1 for one (half the shared memory).
template <int BUFFERS>
__global__ void __launch_bounds__(kMaxWarps * 32)
    small_gemm_mma_kernel(SmallGemmParams all, int tiles_per_block) {
  const SmallGemmParams p = small_gemm_row_tile(all, blockIdx.y);
  __shared__ float ss_part[kMaxWarps][kSmallGemmTileRows];  // [warp][row] sums of squares
  __shared__ __align__(16) bf16 norm_s[kSmallGemmMmaMaxK];
  // [column tile parity][warp][n8 tile][lane] partial sums: with two buffers a
  // tile's partials are written while the previous tile's are still summed.
  __shared__ float4 tile_part[BUFFERS][kMaxWarps][2][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_warps = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const bool swiglu = p.epilogue == SmallGemmParams::Epilogue::kSwiglu;
  const bool add = p.epilogue == SmallGemmParams::Epilogue::kAddF32;
  const int per_tile = swiglu ? 8 : kColsPerBlock;
  const int tile0 = blockIdx.x * tiles_per_block;
  const int n_tiles = min(tiles_per_block, (p.n + per_tile - 1) / per_tile - tile0);
  const int rows[2] = {g, g + 8};
  // The timeline's tables: the o projection (k == n on this model), gate/up, down.
  const bool tl = add && p.k == p.n, tl_gu = swiglu, tl_down = add && p.k != p.n;
  VEGAS_MARK(tl_gemm_o, 0, tl);
  VEGAS_MARK(tl_gemm_gu, 0, tl_gu);
  VEGAS_MARK(tl_gemm_down, 0, tl_down);

  // The weights do not depend on the previous kernel: the first tile's are
  // requested before the PDL wait.
  uint4 wf[2][kChunksPerWarp];
  load_weight_tile(p, tile0, warp, lane, wf);
  small_gemm_stage_norm<kChunksPerWarp>(p, warp, lane, norm_s);
  pdl_wait();  // the rows below come from the previous kernel
  VEGAS_MARK(tl_gemm_o, 1, tl);
  VEGAS_MARK(tl_gemm_gu, 1, tl_gu);
  VEGAS_MARK(tl_gemm_down, 1, tl_down);
  pdl_launch_dependents();

  // Warp c % n_warps sums and stores tile c. For kAddF32 it requests the
  // outputs' current values before the sums (tile 0's before the inputs),
  // so the read-modify-write adds no round trip after them.
  float old[2][2][2] = {};  // [row i][n8 tile j][column e]
  auto request_old = [&](int tile) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = tile * kColsPerBlock + 8 * j + 2 * t + e;
          if (rows[i] < p.m && col < p.n) old[i][j][e] = p.y_f32[int64_t{rows[i]} * p.n + col];
        }
  };
  if (add && warp == 0) request_old(tile0);

  uint4 xa[2][kChunksPerWarp];
  small_gemm_a_fragments<kChunksPerWarp>(p, warp, n_warps, lane, ss_part, norm_s, xa);

  for (int c = 0; c < n_tiles; ++c) {
    const int tile = tile0 + c;
    const bool owner = warp == c % n_warps;
    if (add && owner && c > 0) request_old(tile);
    float acc[2][4];
    small_gemm_mma_chunks<kChunksPerWarp, 2>(xa, wf, acc);
    if (c + 1 < n_tiles) load_weight_tile(p, tile + 1, warp, lane, wf);
    float4(*part)[2][32] = tile_part[c % BUFFERS];
#pragma unroll
    for (int j = 0; j < 2; ++j)
      part[warp][j][lane] = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
    // One barrier a tile: with two buffers, buffer c % 2 is next written at
    // tile c + 2, after every warp, its owner included, passed tile c + 1's
    // barrier (one buffer serves one tile a block).
    __syncthreads();
    if (!owner) continue;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float4 s = part[0][j][lane];
      for (int w = 1; w < n_warps; ++w) {
        const float4 o = part[w][j][lane];
        s.x += o.x, s.y += o.y, s.z += o.z, s.w += o.w;
      }
      acc[j][0] = s.x, acc[j][1] = s.y, acc[j][2] = s.z, acc[j][3] = s.w;
    }
    store_tile(p, tile, lane, acc, old);
  }
  VEGAS_MARK(tl_gemm_o, 2, tl);
  VEGAS_MARK(tl_gemm_gu, 2, tl_gu);
  VEGAS_MARK(tl_gemm_down, 2, tl_down);
}

}  // namespace

int small_gemm_tiles_per_block(int col_tiles, int row_tiles) {
  static const int most = [] {
    const char *env = std::getenv("VEGAS_CUDA_GEMM_TILES");
    const int n = env != nullptr ? std::atoi(env) : 0;
    return n >= 1 && n <= 64 ? n : 4;
  }();
  if (row_tiles <= 1) return 1;  // one row tile: its inputs are read once per column block anyway
  static const int min_blocks = [] {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
      sms = 132;
    return 2 * sms;
  }();
  int tiles = 1;
  while (2 * tiles <= most && (col_tiles + 2 * tiles - 1) / (2 * tiles) * row_tiles >= min_blocks)
    tiles *= 2;
  return tiles;
}

cudaError_t small_gemm_mma(const SmallGemmParams &p, cudaStream_t stream) {
  const bool swiglu = p.epilogue == SmallGemmParams::Epilogue::kSwiglu;
  const int per_tile = swiglu ? 8 : kColsPerBlock;
  const int col_tiles = (p.n + per_tile - 1) / per_tile;
  const int row_tiles = static_cast<int>(small_gemm_row_tiles(p.m));
  const int tiles = small_gemm_tiles_per_block(col_tiles, row_tiles);
  const int warps =
      (p.k + kSmallGemmChunk * kChunksPerWarp - 1) / (kSmallGemmChunk * kChunksPerWarp);
  const dim3 grid(static_cast<unsigned>((col_tiles + tiles - 1) / tiles),
                  static_cast<unsigned>(row_tiles));
  return tiles == 1
             ? launch_kernel(small_gemm_mma_kernel<1>, grid, warps * 32, 0, stream, p, tiles)
             : launch_kernel(small_gemm_mma_kernel<2>, grid, warps * 32, 0, stream, p, tiles);
}

}  // namespace vegas::kernels
