#include "rmsnorm.cuh"

namespace vegas::kernels {

namespace {

__global__ void rmsnorm_kernel(RmsNormParams p) {
  __shared__ float scratch[32];
  const int row = blockIdx.x;
  const int src = p.row_index ? p.row_index[row] : row;
  const float *x = p.x + static_cast<int64_t>(src) * p.hidden;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) ss += x[i] * x[i];
  ss = block_sum(ss, scratch);
  const float inv = rsqrtf(ss / p.hidden + p.eps);
  bf16 *out = p.out + static_cast<int64_t>(row) * p.hidden;
  for (int i = threadIdx.x; i < p.hidden; i += blockDim.x)
    out[i] = __float2bfloat16(x[i] * inv * __bfloat162float(p.weight[i]));
}

}  // namespace

cudaError_t rmsnorm(const RmsNormParams &p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  const int threads = p.hidden >= 1024 ? 512 : 128;
  rmsnorm_kernel<<<p.rows, threads, 0, stream>>>(p);
  return launch_status();
}

}  // namespace vegas::kernels
