// The paged K/V storage of one CUDA context (DESIGN §4): per layer K and V
// [slots][n_kv_heads][head_dim], in bf16 or, with ContextParams::kv_fp8, as
// e4m3 bytes with a power-of-two scale per (slot, KV head) (kernels/kv_fp8.cuh),
// half the bytes a token. Kernels take each layer's caches as bf16 pointers
// and index them by element; for fp8 caches the same index is a byte offset.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_buffer.h"
#include "cuda_utils.cuh"

namespace vegas::cuda {

class DeviceKvCache {
 public:
  // Throws OUT_OF_MEMORY when the caches cannot be allocated, UNSUPPORTED for
  // an fp8 cache of a head_dim that is not a multiple of 16.
  DeviceKvCache(int64_t slots, int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, bool fp8);

  bool fp8() const { return fp8_; }
  // Elements per layer (slots * kv_dim): the layer stride in kernels' units.
  int64_t layer_elements() const { return layer_elements_; }
  // Device bytes of one token's K and V over all layers.
  static uint64_t bytes_per_token(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, bool fp8);

  // Floats from one layer's scales to the next's (0 for bf16 caches).
  int64_t scale_layer_stride() const { return fp8_ ? scale_stride_ : 0; }
  // Layer l's caches (base pointers for kernels) and, fp8 only, its scales
  // ([slots][n_kv_heads]; null for bf16 caches).
  kernels::bf16 *k(int32_t l) const { return layer(k_, l); }
  kernels::bf16 *v(int32_t l) const { return layer(v_, l); }
  float *k_scale(int32_t l) const {
    return fp8_ ? k_scale_.get<float>() + l * scale_stride_ : nullptr;
  }
  float *v_scale(int32_t l) const {
    return fp8_ ? v_scale_.get<float>() + l * scale_stride_ : nullptr;
  }

  // Fills every layer with deterministic random values (synthetic
  // benchmarks): bf16 uniform in [-1, 1); fp8 bytes of magnitude < 2 (no NaN
  // code) with scale 1. Enqueued on `stream`.
  void randomize(uint64_t seed, cudaStream_t stream) const;

 private:
  kernels::bf16 *layer(const DeviceBuffer &b, int32_t l) const {
    return reinterpret_cast<kernels::bf16 *>(b.get<unsigned char>() +
                                             l * layer_elements_ * element_bytes());
  }
  int64_t element_bytes() const { return fp8_ ? 1 : 2; }

  bool fp8_;
  int32_t n_layers_;
  int64_t layer_elements_;  // slots * kv_dim
  int64_t heads_;           // slots * n_kv_heads: scales per layer
  // Floats per layer in the scale arrays: heads_ rounded up to a multiple of
  // four, so each layer's array is 16-byte aligned and whole groups of four
  // (the kernels copy a row's scale with its group: kernels/kv_fp8.cuh).
  int64_t scale_stride_;
  DeviceBuffer k_, v_, k_scale_, v_scale_;
};

}  // namespace vegas::cuda
