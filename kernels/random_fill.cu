#include "random_fill.cuh"

namespace vegas::kernels {

namespace {

// splitmix64 finaliser: a good 64-bit mix of the counter.
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void random_fill_kernel(RandomFillParams p) {
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t r = mix64(p.seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i));
    const float u = static_cast<float>(r >> 40) * (1.0f / 8388608.0f) - 1.0f;  // 24 bits -> [-1, 1)
    if (p.out_bytes != nullptr)
      p.out_bytes[i] = static_cast<uint8_t>(r >> 40) & p.byte_mask;
    else if (p.out_f32 != nullptr)
      p.out_f32[i] = p.offset + p.scale * u;
    else if (p.out_f16 != nullptr)
      p.out_f16[i] = __float2half(p.offset + p.scale * u);
    else
      p.out[i] = __float2bfloat16(p.offset + p.scale * u);
  }
}

}  // namespace

cudaError_t random_fill(const RandomFillParams &p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  const int64_t blocks = (p.n + 255) / 256;
  return launch_kernel(random_fill_kernel, static_cast<int>(blocks < 8192 ? blocks : 8192), 256, 0,
                       stream, p);
}

}  // namespace vegas::kernels
