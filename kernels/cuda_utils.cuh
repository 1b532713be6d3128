// Small device helpers shared by the kernels: bf16 vectors, warp and block
// reductions, launch error reporting. Kernels take raw pointers and a stream
// and return cudaError_t; nothing here knows about the runtime's types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace vegas::kernels {

using bf16 = __nv_bfloat16;
using f16 = __half;

// The error of the last launch (configuration errors show up here).
inline cudaError_t launch_status() {
  return cudaGetLastError();
}

// Programmatic dependent launch (sm_90): a kernel launched through
// launch_kernel may be scheduled while its predecessor in the stream is still
// running, which hides the launch latency between the ~60 small kernels of a
// decode step. Every such kernel starts with pdl_enter(), which waits for the
// predecessor's completion (and its memory) before anything else. On by
// default; VEGAS_CUDA_PDL=0 turns it off (for A/B timing).
//
// The A/B switches of the kernels (VEGAS_CUDA_*): whether environment variable
// `name` leaves the default variant on, i.e. is unset or not `off`. Callers
// keep the answer in a function-local static (read once).
inline bool variant_enabled(const char *name, const char *off = "0") {
  const char *env = std::getenv(name);
  return env == nullptr || std::strcmp(env, off) != 0;
}

// The opposite default: variants still to be proven on a GPU are on only
// when environment variable `name` is "1".
inline bool variant_opted_in(const char *name) {
  const char *env = std::getenv(name);
  return env != nullptr && std::strcmp(env, "1") == 0;
}

// An integer A/B knob: environment variable `name` as a number, or
// `fallback` where it is unset or empty. Callers keep it in a static too.
inline int env_knob(const char *name, int fallback) {
  const char *env = std::getenv(name);
  return env != nullptr && *env != '\0' ? std::atoi(env) : fallback;
}

inline bool programmatic_launch_enabled() {
  static const bool enabled = variant_enabled("VEGAS_CUDA_PDL");
  return enabled;
}

// launch_kernel with thread-block clusters of `*cluster` blocks when cluster
// is not null (sm_90; each grid dimension a multiple of the cluster's).
template <typename... Params, typename... Args>
cudaError_t launch_kernel_in(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                             cudaStream_t stream, const dim3 *cluster, Args &&...args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[2] = {};
  unsigned n = 0;
  if (programmatic_launch_enabled()) {
    attribute[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster != nullptr) {
    attribute[n].id = cudaLaunchAttributeClusterDimension;
    attribute[n].val.clusterDim.x = cluster->x;
    attribute[n].val.clusterDim.y = cluster->y;
    attribute[n++].val.clusterDim.z = cluster->z;
  }
  config.attrs = attribute;
  config.numAttrs = n;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                          cudaStream_t stream, Args &&...args) {
  return launch_kernel_in(kernel, grid, block, smem, stream, nullptr, std::forward<Args>(args)...);
}

template <typename... Params, typename... Args>
cudaError_t launch_kernel_cluster(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                  cudaStream_t stream, dim3 cluster, Args &&...args) {
  return launch_kernel_in(kernel, grid, block, smem, stream, &cluster, std::forward<Args>(args)...);
}

#if defined(__CUDACC__)  // device helpers: only in .cu translation units

// First statement of every kernel started by launch_kernel: wait until the
// previous kernel of the stream has finished and its writes are visible (no
// block may read or write shared buffers before), then let the next kernel be
// scheduled. Its blocks can only become resident once every block of this
// grid has passed this point, so waiting blocks never starve this grid.
// Kernels that can start work not depending on the previous kernel (reading
// weights) call the two halves separately, pdl_wait() before any other access.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_enter() {
  pdl_wait();
  pdl_launch_dependents();
}

// Brings the 128-byte line holding p into L1 (no register, no wait).
__device__ __forceinline__ void prefetch_l1(const void *p) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over a block of at most 1024 threads; `scratch` holds 32 floats. Every
// thread gets the result.
__device__ __forceinline__ float block_sum(float v, float *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int n_warps = (blockDim.x + 31) >> 5;
  v = lane < n_warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

// Eight bf16 packed in 16 bytes, to and from f32.
__device__ __forceinline__ void unpack8(const uint4 &u, float *f) {
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

__device__ __forceinline__ uint4 pack8(const float *f) {
  uint4 u;
  __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return u;
}

#endif  // __CUDACC__

}  // namespace vegas::kernels
