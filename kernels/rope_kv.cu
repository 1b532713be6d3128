#include "rope_kv.cuh"

namespace vegas::kernels {

namespace {

constexpr int kMaxHeadDim = 256;
constexpr int kWarps = 4;

// One warp per (row, head): q heads, then k, then v.
__global__ void rope_kv_kernel(RopeKvParams p) {
  pdl_enter();
  __shared__ float head[kWarps][kMaxHeadDim];
  const int row = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int hd = p.head_dim;
  const int width = (p.n_heads + 2 * p.n_kv_heads) * hd;
  const bf16 *src_row = p.qkv + static_cast<int64_t>(row) * width;
  const int pos = p.positions[row];
  const int slot = p.slots ? p.slots[row] : -1;
  float *x = head[warp];
  // Heads are spread over blockIdx.y too: one row's dozen heads on one block
  // ran three rounds of dependent loads and sincosf (10 us per layer at 16 rows).
  for (int h = blockIdx.y * kWarps + warp; h < p.n_heads + 2 * p.n_kv_heads;
       h += gridDim.y * kWarps) {
    const bool is_q = h < p.n_heads, is_v = h >= p.n_heads + p.n_kv_heads;
    const int col0 = h * hd;
    for (int i = lane; i < hd; i += 32) {
      float v = __bfloat162float(src_row[col0 + i]);
      if (p.bias) v += __bfloat162float(p.bias[col0 + i]);
      x[i] = v;
    }
    __syncwarp();
    bf16 *dst;
    if (is_q) {
      dst = p.q_out + (static_cast<int64_t>(row) * p.n_heads + h) * hd;
    } else {
      if (slot < 0) continue;  // padding row: no cache write
      const int kvh = is_v ? h - p.n_heads - p.n_kv_heads : h - p.n_heads;
      dst = (is_v ? p.v_cache : p.k_cache) + (static_cast<int64_t>(slot) * p.n_kv_heads + kvh) * hd;
    }
    if (is_v) {
      for (int i = lane; i < hd; i += 32) dst[i] = __float2bfloat16(x[i]);
      __syncwarp();
      continue;
    }
    const bf16 *norm = is_q ? p.q_norm : p.k_norm;
    float scale = 1.0f;
    if (norm) {
      float ss = 0.0f;
      for (int i = lane; i < hd; i += 32) ss += x[i] * x[i];
      ss = warp_sum(ss);
      scale = rsqrtf(ss / hd + p.norm_eps);
    }
    float out[kMaxHeadDim / 32];
    const int half = p.rot_dim / 2;
#pragma unroll
    for (int j = 0; j < kMaxHeadDim / 32; ++j) {
      const int i = lane + 32 * j;
      if (i >= hd) break;
      float xi = x[i] * scale;
      if (norm) xi *= __bfloat162float(norm[i]);
      if (i < p.rot_dim) {
        const int pair = i < half ? i + half : i - half;
        float xp = x[pair] * scale;
        if (norm) xp *= __bfloat162float(norm[pair]);
        float s, c;
        sincosf(static_cast<float>(pos) * p.inv_freq[i < half ? i : i - half], &s, &c);
        c *= p.attention_scaling;
        s *= p.attention_scaling;
        xi = i < half ? xi * c - xp * s : xi * c + xp * s;
      }
      out[j] = xi;
    }
#pragma unroll
    for (int j = 0; j < kMaxHeadDim / 32; ++j) {
      const int i = lane + 32 * j;
      if (i >= hd) break;
      dst[i] = __float2bfloat16(out[j]);
    }
    __syncwarp();
  }
}

}  // namespace

cudaError_t rope_kv(const RopeKvParams &p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.head_dim > kMaxHeadDim || p.rot_dim > p.head_dim || (p.rot_dim & 1))
    return cudaErrorInvalidValue;
  const int heads = p.n_heads + 2 * p.n_kv_heads;
  const dim3 grid(p.rows, (heads + kWarps - 1) / kWarps);
  return launch_kernel(rope_kv_kernel, grid, kWarps * 32, 0, stream, p);
}

}  // namespace vegas::kernels
