#include "rope_kv.cuh"

namespace vegas::kernels {

namespace {

constexpr int kWarps = 4;

// One warp per (row, head): q heads, then k, then v.
__global__ void rope_kv_kernel(RopeKvParams p) {
  pdl_enter();
  __shared__ float head[kWarps][kRopeMaxHeadDim];
  const int row = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int hd = p.head_dim;
  const int width = (p.n_heads + 2 * p.n_kv_heads) * hd;
  const bf16 *src_row = p.qkv + static_cast<int64_t>(row) * width;
  float *x = head[warp];
  // Heads are spread over blockIdx.y too: one row's dozen heads on one block
  // ran three rounds of dependent loads and sincosf (10 us per layer at 16 rows).
  for (int h = blockIdx.y * kWarps + warp; h < p.n_heads + 2 * p.n_kv_heads;
       h += gridDim.y * kWarps) {
    const int col0 = h * hd;
    for (int i = lane; i < hd; i += 32) {
      float v = __bfloat162float(src_row[col0 + i]);
      if (p.bias) v += __bfloat162float(p.bias[col0 + i]);
      x[i] = v;
    }
    __syncwarp();
    rope_kv_head(p, row, h, x, lane);
    __syncwarp();
  }
}

}  // namespace

cudaError_t rope_kv(const RopeKvParams &p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.head_dim > kRopeMaxHeadDim || p.rot_dim > p.head_dim || (p.rot_dim & 1))
    return cudaErrorInvalidValue;
  const int heads = p.n_heads + 2 * p.n_kv_heads;
  const dim3 grid(p.rows, (heads + kWarps - 1) / kWarps);
  return launch_kernel(rope_kv_kernel, grid, kWarps * 32, 0, stream, p);
}

}  // namespace vegas::kernels
