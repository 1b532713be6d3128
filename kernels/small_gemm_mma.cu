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
//
// With several row tiles (verification) the staged kernel takes the call
// instead, but for the lm_head: every column block re-reads and re-normalises
// its row tile's inputs (a 112-row SwiGLU did so in 64 column blocks a row
// tile) and waits for each column tile's weights in turn. Its blocks
// take up to 8 column tiles, copy all their weights into shared memory before
// the PDL wait (no per-tile round trip), compute every tile back to back and
// meet at one barrier; each tile's sums are the per-tile kernel's, operation
// for operation, so a row's outputs do not depend on the kernel.
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

// Calls f(j, c, source, valid) for each 16-byte piece of column tile
// `tile`'s weight fragments that this lane holds (16 output columns, or 8 for
// SwiGLU: their gate (j = 0) and up (j = 1) rows; chunk c of this warp's slice
// of K); `valid` is false past n or k, where the piece is zeros.
template <typename F>
__device__ __forceinline__ void for_each_weight_piece(const SmallGemmParams &p, int tile, int warp,
                                                      int lane, F &&f) {
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
      f(j, c, wrow + kk, valid && kk < p.k);
    }
  }
}

// Weight fragments of column tile `tile` for this warp's slice of K.
__device__ __forceinline__ void load_weight_tile(const SmallGemmParams &p, int tile, int warp,
                                                 int lane, uint4 (&wf)[2][kChunksPerWarp]) {
  for_each_weight_piece(p, tile, warp, lane, [&](int j, int c, const bf16 *src, bool valid) {
    wf[j][c] = load16_or_zero(src, valid);
  });
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

// Shared memory of a staged block: per warp and column tile, the weight
// fragments each lane copied (2 x kChunksPerWarp x 32 uint4) and the warp's
// partial sums of the tile (2 x 32 float4).
constexpr int kStagedTileWeights = 2 * kChunksPerWarp * 32;
constexpr int kStagedTilePartials = 2 * 32;
constexpr size_t staged_smem(int warps, int tiles) {
  return sizeof(uint4) * static_cast<size_t>(warps) * tiles *
         (kStagedTileWeights + kStagedTilePartials);
}
constexpr int kStagedMaxTiles = 8;
constexpr int kStagedOwned = 2;  // column tiles a warp stores: tiles <= 2 x warps
constexpr size_t kStagedMaxSmem = 200 * 1024;

// Block (x, y): column tiles x * tiles .. + tiles - 1 of row tile y, as
// small_gemm_mma_kernel's, but each warp copies its slice of every tile's
// weights into its own shared memory (it alone reads them back, so no barrier
// guards them) before the PDL wait, and writes each tile's partial sums as
// soon as the tile's mma are done: one barrier a block. Tile c is summed and
// stored by warp c % warps, in warp order, as the per-tile kernel does.
__global__ void __launch_bounds__(kMaxWarps * 32)
    small_gemm_staged_kernel(SmallGemmParams all, int tiles_per_block) {
  const SmallGemmParams p = small_gemm_row_tile(all, blockIdx.y);
  extern __shared__ uint4 staged[];
  __shared__ float ss_part[kMaxWarps][kSmallGemmTileRows];
  __shared__ __align__(16) bf16 norm_s[kSmallGemmMmaMaxK];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_warps = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const bool swiglu = p.epilogue == SmallGemmParams::Epilogue::kSwiglu;
  const bool add = p.epilogue == SmallGemmParams::Epilogue::kAddF32;
  const int per_tile = swiglu ? 8 : kColsPerBlock;
  const int tile0 = blockIdx.x * tiles_per_block;
  const int n_tiles = min(tiles_per_block, (p.n + per_tile - 1) / per_tile - tile0);
  uint4 *weights = staged + static_cast<size_t>(warp) * tiles_per_block * kStagedTileWeights;
  float4 *partials = reinterpret_cast<float4 *>(staged + static_cast<size_t>(n_warps) *
                                                             tiles_per_block * kStagedTileWeights);
  // Partial sums of tile c of warp w: partials[(w * tiles_per_block + c) * 64 + j * 32 + lane].
  auto partial_at = [&](int w, int c, int j) {
    return partials + (static_cast<size_t>(w) * tiles_per_block + c) * kStagedTilePartials +
           j * 32 + lane;
  };

  // Every tile's weights (load_weight_tile's fragments, zero past n or k).
  for (int c = 0; c < n_tiles; ++c)
    for_each_weight_piece(
        p, tile0 + c, warp, lane, [&](int j, int ch, const bf16 *src, bool valid) {
          mma::cp_async16(weights + (c * 2 + j) * kChunksPerWarp * 32 + ch * 32 + lane, src, valid);
        });
  mma::cp_async_commit();
  small_gemm_stage_norm<kChunksPerWarp>(p, warp, lane, norm_s);
  pdl_wait();  // the rows below come from the previous kernel
  pdl_launch_dependents();

  // kAddF32: the current outputs of the (at most two) tiles this warp stores.
  float old[kStagedOwned][2][2][2] = {};  // [owned][row i][n8 tile j][column e]
  if (add)
#pragma unroll
    for (int o = 0; o < kStagedOwned; ++o) {
      const int c = warp + o * n_warps;
      if (c >= n_tiles) break;
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int row = g + 8 * i, col = (tile0 + c) * kColsPerBlock + 8 * j + 2 * t + e;
            if (row < p.m && col < p.n) old[o][i][j][e] = p.y_f32[int64_t{row} * p.n + col];
          }
    }

  uint4 xa[2][kChunksPerWarp];
  // With f32 inputs: waits for this thread's copies and has a barrier.
  small_gemm_a_fragments<kChunksPerWarp>(p, warp, n_warps, lane, ss_part, norm_s, xa);
  mma::cp_async_wait<0>();  // (bf16 inputs: the call above did not wait)
  for (int c = 0; c < n_tiles; ++c) {
    uint4 wf[2][kChunksPerWarp];
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int ch = 0; ch < kChunksPerWarp; ++ch)
        wf[j][ch] = weights[(c * 2 + j) * kChunksPerWarp * 32 + ch * 32 + lane];
    float acc[2][4];
    small_gemm_mma_chunks<kChunksPerWarp, 2>(xa, wf, acc);
#pragma unroll
    for (int j = 0; j < 2; ++j)
      *partial_at(warp, c, j) = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
  }
  __syncthreads();
#pragma unroll
  for (int o = 0; o < kStagedOwned; ++o) {
    const int c = warp + o * n_warps;
    if (c >= n_tiles) break;
    float acc[2][4];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float4 s = *partial_at(0, c, j);
      for (int w = 1; w < n_warps; ++w) {
        const float4 q = *partial_at(w, c, j);
        s.x += q.x, s.y += q.y, s.z += q.z, s.w += q.w;
      }
      acc[j][0] = s.x, acc[j][1] = s.y, acc[j][2] = s.z, acc[j][3] = s.w;
    }
    store_tile(p, tile0 + c, lane, acc, old[o]);
  }
}

// Warps of a block of either kernel: K cut in slices of 128 inputs.
int warps_for(int32_t k) {
  return (k + kSmallGemmChunk * kChunksPerWarp - 1) / (kSmallGemmChunk * kChunksPerWarp);
}

// Column tiles of a call: 16 output columns a tile, 8 for SwiGLU.
int col_tiles_of(const SmallGemmParams &p) {
  const int per_tile = p.epilogue == SmallGemmParams::Epilogue::kSwiglu ? 8 : kColsPerBlock;
  return (p.n + per_tile - 1) / per_tile;
}

int multiprocessors() {
  static const int sms = [] {
    int device = 0, n = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
      n = 132;
    return n;
  }();
  return sms;
}

// Column tiles a block, doubled from `least` up to `most` while the grid
// keeps at least min_blocks blocks.
int tiles_keeping_blocks(int col_tiles, int row_tiles, int least, int most, int min_blocks) {
  int tiles = least;
  while (2 * tiles <= most && (col_tiles + 2 * tiles - 1) / (2 * tiles) * row_tiles >= min_blocks)
    tiles *= 2;
  return tiles;
}

// Column tiles per staged block: VEGAS_CUDA_GEMM_STAGED_TILES (1, 2, 4 or 8)
// where given, else the most that keep a block on every multiprocessor.
// Halved until small_gemm_staged_supports takes it (two a warp, shared memory).
int staged_tiles_per_block(int col_tiles, int row_tiles, int32_t k) {
  static const int forced = [] {
    const char *env = std::getenv("VEGAS_CUDA_GEMM_STAGED_TILES");
    const int n = env != nullptr ? std::atoi(env) : 0;
    return n == 1 || n == 2 || n == 4 || n == 8 ? n : 0;
  }();
  int tiles = forced != 0 ? forced
                          : tiles_keeping_blocks(col_tiles, row_tiles, 2, kStagedMaxTiles,
                                                 multiprocessors());
  while (tiles > 1 && !small_gemm_staged_supports(k, tiles)) tiles /= 2;
  return tiles;
}

// The staged kernel for calls of several row tiles (on by default;
// VEGAS_CUDA_GEMM_STAGED=0 keeps the per-tile kernel, for A/B timing).
bool staged_enabled() {
  static const bool enabled = variant_enabled("VEGAS_CUDA_GEMM_STAGED");
  return enabled;
}

}  // namespace

cudaError_t small_gemm_mma_init() {
  return cudaFuncSetAttribute(small_gemm_staged_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(kStagedMaxSmem));
}

int small_gemm_tiles_per_block(int col_tiles, int row_tiles) {
  static const int most = [] {
    const char *env = std::getenv("VEGAS_CUDA_GEMM_TILES");
    const int n = env != nullptr ? std::atoi(env) : 0;
    return n >= 1 && n <= 64 ? n : 4;
  }();
  if (row_tiles <= 1) return 1;  // one row tile: its inputs are read once per column block anyway
  return tiles_keeping_blocks(col_tiles, row_tiles, 1, most, 2 * multiprocessors());
}

cudaError_t small_gemm_mma(const SmallGemmParams &p, cudaStream_t stream) {
  const int row_tiles = static_cast<int>(small_gemm_row_tiles(p.m));
  // The lm_head (kStoreF32: 8192 columns on the 22m) keeps the per-tile
  // kernel, whose blocks of 4 tiles beat 8 staged ones there.
  if (row_tiles > 1 && p.epilogue != SmallGemmParams::Epilogue::kStoreF32 && staged_enabled())
    return small_gemm_staged(p, stream, 0);
  const int col_tiles = col_tiles_of(p);
  const int tiles = small_gemm_tiles_per_block(col_tiles, row_tiles);
  const int warps = warps_for(p.k);
  const dim3 grid(static_cast<unsigned>((col_tiles + tiles - 1) / tiles),
                  static_cast<unsigned>(row_tiles));
  return tiles == 1
             ? launch_kernel(small_gemm_mma_kernel<1>, grid, warps * 32, 0, stream, p, tiles)
             : launch_kernel(small_gemm_mma_kernel<2>, grid, warps * 32, 0, stream, p, tiles);
}

bool small_gemm_staged_supports(int32_t k, int tiles) {
  const int warps = warps_for(k);
  return k >= 8 && k <= kSmallGemmMmaMaxK && tiles >= 1 && tiles <= kStagedMaxTiles &&
         tiles <= kStagedOwned * warps && staged_smem(warps, tiles) <= kStagedMaxSmem;
}

cudaError_t small_gemm_staged(const SmallGemmParams &p, cudaStream_t stream, int tiles) {
  const int col_tiles = col_tiles_of(p);
  const int row_tiles = static_cast<int>(small_gemm_row_tiles(p.m));
  const int warps = warps_for(p.k);
  if (tiles == 0) tiles = staged_tiles_per_block(col_tiles, row_tiles, p.k);
  if (!small_gemm_staged_supports(p.k, tiles)) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((col_tiles + tiles - 1) / tiles),
                  static_cast<unsigned>(row_tiles));
  return launch_kernel(small_gemm_staged_kernel, grid, warps * 32, staged_smem(warps, tiles),
                       stream, p, tiles);
}

}  // namespace vegas::kernels
