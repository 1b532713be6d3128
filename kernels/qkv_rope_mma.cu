// One block per head (q heads, then k, then v) and 16-row tile (blockIdx.y, up
// to kSmallGemmMmaMaxRows rows): its head_dim / 8 n8 tiles of the qkv projection, the K dimension
// cut across up to 16 warps of CPW 32-input chunks (small_gemm_fragments.cuh). The weights do not
// depend on the previous kernel and are requested before waiting on it (PDL); every warp leaves its
// partial tiles in shared memory and one warp per tile adds them in warp order (the result does
// not depend on timing; two barriers where a tree of warp pairs took two per level), and the
// head's [rows][head_dim] outputs go through shared memory to rope_kv_head, one warp per row.
#include "qkv_rope.cuh"
#include "small_gemm_fragments.cuh"
#include "timeline.cuh"

#if defined(VEGAS_TIMELINE)
VEGAS_TIMELINE_TABLE(tl_qkv)
#endif

namespace vegas::kernels {

namespace {

constexpr int kMaxWarps = 16;

template <int HD, int CPW>
__global__ void __launch_bounds__(kMaxWarps * 32)
    qkv_rope_mma_kernel(SmallGemmParams all, RopeKvParams r) {
  VEGAS_MARK(tl_qkv, 0, true);
  const SmallGemmParams g = small_gemm_row_tile(all, blockIdx.y);  // rows r0 .. r0 + 15
  const int r0 = kSmallGemmTileRows * blockIdx.y;
  constexpr int kTiles = HD / 8;
  extern __shared__ float4 partial[];  // [n_warps][kTiles][32] warp partial tiles
  __shared__ float ss_part[kMaxWarps][kSmallGemmTileRows];
  __shared__ __align__(16) bf16 norm_s[kMaxWarps * CPW * kSmallGemmChunk];
  __shared__ float head_rows[kSmallGemmTileRows][HD];  // the head's outputs, bias added
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_warps = blockDim.x >> 5;
  const int gq = lane >> 2, t = lane & 3;
  const int head = blockIdx.x;
  const int k = g.k;

  uint4 wf[kTiles][CPW];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    const bf16 *wrow = g.w + static_cast<int64_t>(head * HD + 8 * j + gq) * k;
#pragma unroll
    for (int c = 0; c < CPW; ++c) {
      const int kk = small_gemm_input<CPW>(warp, c, t);
      wf[j][c] = load16_or_zero(wrow + kk, kk < k);
    }
  }
  small_gemm_stage_norm<CPW>(g, warp, lane, norm_s);
  // The epilogue's inputs that are final already (host indices, weights),
  // into L1 now rather than a round trip after the sums.
  if (warp == 0) {
    if (lane < g.m) {
      prefetch_l1(r.positions + r0 + lane);
      if (r.slots) prefetch_l1(r.slots + r0 + lane);
    }
    if (lane == 16 && r.q_norm) prefetch_l1(r.q_norm);
    if (lane == 17 && r.k_norm) prefetch_l1(r.k_norm);
    if (lane == 18) prefetch_l1(r.inv_freq);
    if (lane == 19 && r.bias) prefetch_l1(r.bias + head * HD);
  }
  pdl_wait();  // the rows (and the cache slots written below) follow the previous kernel
  VEGAS_MARK(tl_qkv, 1, true);
  pdl_launch_dependents();

  uint4 xa[2][CPW];
  small_gemm_a_fragments<CPW>(g, warp, n_warps, lane, ss_part, norm_s, xa);
  float acc[kTiles][4];
  small_gemm_mma_chunks<CPW, kTiles>(xa, wf, acc);
  VEGAS_MARK(tl_qkv, 2, true);

#pragma unroll
  for (int j = 0; j < kTiles; ++j)
    partial[(warp * kTiles + j) * 32 + lane] =
        make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
  __syncthreads();

  // Tile j's sum over the warps, by warp j % n_warps. Accumulator layout: rows
  // gq (x, y) and gq + 8 (z, w), columns 8j + 2t, 8j + 2t + 1.
  for (int j = warp; j < kTiles; j += n_warps) {
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int w = 0; w < n_warps; ++w) {
      const float4 o = partial[(w * kTiles + j) * 32 + lane];
      sum[0] += o.x, sum[1] += o.y, sum[2] += o.z, sum[3] += o.w;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = e < 2 ? gq : gq + 8, col = 8 * j + 2 * t + (e & 1);
      float v = __bfloat162float(__float2bfloat16(sum[e]));  // the stored qkv value
      if (r.bias) v += __bfloat162float(r.bias[head * HD + col]);
      head_rows[row][col] = v;
    }
  }
  __syncthreads();
  for (int row = warp; row < g.m; row += n_warps)
    rope_kv_head(r, r0 + row, head, head_rows[row], lane);
  VEGAS_MARK(tl_qkv, 3, true);
}

template <int HD>
int shared_bytes(int n_warps) {
  return n_warps * (HD / 8) * 32 * static_cast<int>(sizeof(float4));
}

template <int HD, int CPW>
cudaError_t launch(const SmallGemmParams &g, const RopeKvParams &r, cudaStream_t stream) {
  const int n_warps = (g.k + kSmallGemmChunk * CPW - 1) / (kSmallGemmChunk * CPW);
  const unsigned heads = static_cast<unsigned>(r.n_heads + 2 * r.n_kv_heads);
  const dim3 grid(heads, small_gemm_row_tiles(g.m));
  return launch_kernel(qkv_rope_mma_kernel<HD, CPW>, grid, n_warps * 32, shared_bytes<HD>(n_warps),
                       stream, g, r);
}

template <int HD, int CPW>
cudaError_t set_limit() {
  return cudaFuncSetAttribute(qkv_rope_mma_kernel<HD, CPW>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              shared_bytes<HD>(kMaxWarps));
}

}  // namespace

bool qkv_rope_mma_supports(int32_t m, int32_t k, int32_t head_dim) {
  if (m < 1 || m > kSmallGemmMmaMaxRows || k < 1 || k % 8 != 0) return false;
  return (head_dim == 64 && k <= 2 * kMaxWarps * kSmallGemmChunk) ||
         (head_dim == 128 && k <= kMaxWarps * kSmallGemmChunk);
}

cudaError_t qkv_rope_mma(const SmallGemmParams &g, const RopeKvParams &r, cudaStream_t stream) {
  if (g.m == 0) return cudaSuccess;
  if (!qkv_rope_mma_supports(g.m, g.k, r.head_dim) || r.rows != g.m || g.w == nullptr ||
      (g.x_f32 == nullptr) == (g.x_bf16 == nullptr) || (g.x_f32 && !g.norm_weight) ||
      r.rot_dim > r.head_dim || (r.rot_dim & 1))
    return cudaErrorInvalidValue;
  if (r.head_dim == 128) return launch<128, 1>(g, r, stream);
  return g.k <= kMaxWarps * kSmallGemmChunk ? launch<64, 1>(g, r, stream)
                                            : launch<64, 2>(g, r, stream);
}

cudaError_t qkv_rope_mma_init() {
  cudaError_t e = set_limit<64, 1>();
  if (e == cudaSuccess) e = set_limit<64, 2>();
  if (e == cudaSuccess) e = set_limit<128, 1>();
  return e;
}

}  // namespace vegas::kernels
