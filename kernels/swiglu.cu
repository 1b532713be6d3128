#include "swiglu.cuh"

namespace vegas::kernels {

namespace {

__global__ void swiglu_kernel(SwigluParams p) {
  pdl_enter();
  const int64_t n = static_cast<int64_t>(p.rows) * p.inter;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / p.inter, col = i % p.inter;
    const bf16 *gu = p.gate_up + row * 2 * p.inter;
    const float g = __bfloat162float(gu[col]);
    const float u = __bfloat162float(gu[p.inter + col]);
    p.out[i] = swiglu_value(g, u);
  }
}

}  // namespace

cudaError_t swiglu(const SwigluParams &p, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(p.rows) * p.inter;
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  return launch_kernel(swiglu_kernel, static_cast<int>(blocks < 65535 ? blocks : 65535), threads, 0,
                       stream, p);
}

}  // namespace vegas::kernels
