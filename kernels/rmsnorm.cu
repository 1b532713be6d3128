#include "rmsnorm.cuh"

namespace vegas::kernels {

namespace {

constexpr int kCached = 4;  // float4s per thread kept in registers between the two passes

// One block per row. Rows of up to kCached * 4 * blockDim.x values are read
// once into registers (vectorised); longer or unaligned rows read x twice.
__global__ void rmsnorm_kernel(RmsNormParams p) {
  pdl_enter();
  __shared__ float scratch[32];
  const int row = blockIdx.x;
  const int src = p.row_index ? p.row_index[row] : row;
  const float *x = p.x + static_cast<int64_t>(src) * p.hidden;
  bf16 *out = p.out + static_cast<int64_t>(row) * p.hidden;
  const bool cached = p.hidden % 4 == 0 && p.hidden <= kCached * 4 * static_cast<int>(blockDim.x);
  if (cached) {
    const int n4 = p.hidden / 4;
    float4 v[kCached];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      v[k] = i < n4 ? reinterpret_cast<const float4 *>(x)[i] : make_float4(0, 0, 0, 0);
      ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
    }
    ss = block_sum(ss, scratch);
    const float inv = rsqrtf(ss / p.hidden + p.eps);
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (i >= n4) break;
      const float w0 = __bfloat162float(p.weight[4 * i]),
                  w1 = __bfloat162float(p.weight[4 * i + 1]);
      const float w2 = __bfloat162float(p.weight[4 * i + 2]);
      const float w3 = __bfloat162float(p.weight[4 * i + 3]);
      out[4 * i] = __float2bfloat16(v[k].x * inv * w0);
      out[4 * i + 1] = __float2bfloat16(v[k].y * inv * w1);
      out[4 * i + 2] = __float2bfloat16(v[k].z * inv * w2);
      out[4 * i + 3] = __float2bfloat16(v[k].w * inv * w3);
    }
    return;
  }
  float ss = 0.0f;
  for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) ss += x[i] * x[i];
  ss = block_sum(ss, scratch);
  const float inv = rsqrtf(ss / p.hidden + p.eps);
  for (int i = threadIdx.x; i < p.hidden; i += blockDim.x)
    out[i] = __float2bfloat16(x[i] * inv * __bfloat162float(p.weight[i]));
}

}  // namespace

cudaError_t rmsnorm(const RmsNormParams &p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  const int threads = p.hidden >= 1024 ? 512 : 128;
  return launch_kernel(rmsnorm_kernel, p.rows, threads, 0, stream, p);
}

}  // namespace vegas::kernels
