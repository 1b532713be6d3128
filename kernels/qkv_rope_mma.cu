// One block per head (q heads, then k, then v) and 16-row tile (blockIdx.y, up
// to kSmallGemmMmaMaxRows rows): its head_dim / 8 n8 tiles of the qkv projection, the K dimension
// cut across up to 16 warps of CPW 32-input chunks (small_gemm_fragments.cuh). The weights, and
// RoPE's cos / sin, norm weights and cache slots (stage_rope_inputs), do not depend on the previous
// kernel and are read before waiting on it (PDL); every warp leaves its
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

// The epilogue's inputs for one head and row tile, staged before the PDL wait.
template <int HD>
struct RopeInputs {
  float cos[kSmallGemmTileRows][HD / 2];  // times the attention scaling
  float sin[kSmallGemmTileRows][HD / 2];
  float norm[HD];                    // the head's q or k norm weights
  int32_t slot[kSmallGemmTileRows];  // k and v heads' cache slots
};

// Fills `in` for rows r0 .. r0 + m - 1: cos and sin when `rotates` (q and k
// heads), norm from `norm` (null: none), slots when `cached` (k and v heads).
// Every thread of the block calls it; a later __syncthreads publishes it.
template <int HD>
__device__ __forceinline__ void stage_rope_inputs(const RopeKvParams &r, int r0, int m,
                                                  const bf16 *norm, bool rotates, bool cached,
                                                  RopeInputs<HD> &in) {
  const int half = r.rot_dim / 2;
  if (rotates)
    for (int idx = threadIdx.x; idx < m * half; idx += blockDim.x) {
      const int row = idx / half, f = idx - row * half;
      rope_cos_sin(r, r.positions[r0 + row], f, in.cos[row][f], in.sin[row][f]);
    }
  if (norm != nullptr)
    for (int i = threadIdx.x; i < HD; i += blockDim.x) in.norm[i] = __bfloat162float(norm[i]);
  if (cached && static_cast<int>(threadIdx.x) < m)
    in.slot[threadIdx.x] = r.slots ? r.slots[r0 + threadIdx.x] : -1;
}

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
  __shared__ RopeInputs<HD> rope;
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
  if (warp == 0 && lane == 19 && r.bias) prefetch_l1(r.bias + head * HD);
  // The epilogue's other inputs are final already (host-staged positions and
  // slots, weights): the rows' cos and sin (a sincosf a thread), the head's
  // norm weights and the slots go to shared memory now, so that the epilogue
  // after the sums reads nothing from global memory.
  const bool is_q = head < r.n_heads, is_v = head >= r.n_heads + r.n_kv_heads;
  const bf16 *qk_norm = is_q ? r.q_norm : r.k_norm;
  stage_rope_inputs<HD>(r, r0, g.m, is_v ? nullptr : qk_norm, !is_v, !is_q, rope);
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
  VEGAS_MARK(tl_qkv, 3, true);

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
  VEGAS_MARK(tl_qkv, 4, true);
  for (int row = warp; row < g.m; row += n_warps)
    rope_kv_head_with(
        r, r0 + row, head, head_rows[row], lane, rope.slot[row], !is_v && qk_norm != nullptr,
        [&](int f, float &c, float &s) { c = rope.cos[row][f], s = rope.sin[row][f]; },
        [&](int i) { return rope.norm[i]; });
  VEGAS_MARK(tl_qkv, 5, true);
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
