#include "move_kv.cuh"

namespace vegas::kernels {

namespace {

constexpr int kThreads = 128;

// Block (layer, K or V): each thread owns 16-byte chunks of a slot row (and
// a KV head's scale) and copies them for every move, in order.
__global__ void move_kv_kernel(MoveKvParams p) {
  pdl_enter();
  const int layer = blockIdx.x >> 1;
  const bool is_v = blockIdx.x & 1;
  unsigned char *cache =
      reinterpret_cast<unsigned char *>(is_v ? p.v_cache : p.k_cache) + layer * p.layer_bytes;
  const int chunks = p.row_bytes / 16;
  for (int c = threadIdx.x; c < chunks; c += kThreads)
    for (int i = 0; i < p.n; ++i) {
      const uint4 x = *reinterpret_cast<const uint4 *>(cache + p.from[i] * p.row_bytes + c * 16);
      *reinterpret_cast<uint4 *>(cache + p.to[i] * p.row_bytes + c * 16) = x;
    }
  float *scale = is_v ? p.v_scale : p.k_scale;
  if (scale == nullptr) return;
  scale += layer * p.scale_layer_stride;
  for (int h = threadIdx.x; h < p.n_kv_heads; h += kThreads)
    for (int i = 0; i < p.n; ++i)
      scale[p.to[i] * p.n_kv_heads + h] = scale[p.from[i] * p.n_kv_heads + h];
}

}  // namespace

cudaError_t move_kv(const MoveKvParams &p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  if (p.n < 0 || p.k_cache == nullptr || p.v_cache == nullptr || p.from == nullptr ||
      p.to == nullptr || p.n_layers <= 0 || p.row_bytes <= 0 || p.row_bytes % 16 != 0 ||
      ((p.k_scale == nullptr) != (p.v_scale == nullptr)) ||
      (p.k_scale != nullptr && p.n_kv_heads <= 0))
    return cudaErrorInvalidValue;
  return launch_kernel(move_kv_kernel, 2 * p.n_layers, kThreads, 0, stream, p);
}

}  // namespace vegas::kernels
