#include "backend/cuda/device_kv_cache.h"

#include <string>

#include "common/error.h"
#include "random_fill.cuh"

namespace vegas::cuda {

DeviceKvCache::DeviceKvCache(int64_t slots, int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                             bool fp8)
    : fp8_(fp8),
      n_layers_(n_layers),
      layer_elements_(slots * n_kv_heads * head_dim),
      heads_(slots * n_kv_heads),
      scale_stride_((heads_ + 3) / 4 * 4) {
  if (fp8 && head_dim % 16 != 0)  // the kernels stage fp8 rows in 16-byte chunks
    fail(VEGAS_ERR_UNSUPPORTED,
         "CUDA context: an fp8 KV cache needs a head_dim that is a multiple of 16 (the model's "
         "is " +
             std::to_string(head_dim) + ")");
  const size_t bytes = static_cast<size_t>(layer_elements_ * n_layers * element_bytes());
  k_.allocate(bytes, "the K cache");
  v_.allocate(bytes, "the V cache");
  if (fp8_) {
    const size_t scale_bytes = static_cast<size_t>(scale_stride_ * n_layers) * sizeof(float);
    k_scale_.allocate(scale_bytes, "the K cache's scales");
    v_scale_.allocate(scale_bytes, "the V cache's scales");
  }
}

uint64_t DeviceKvCache::bytes_per_token(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                                        bool fp8) {
  const uint64_t per_head = fp8 ? uint64_t(head_dim) + sizeof(float) : uint64_t(head_dim) * 2;
  return 2 * uint64_t(n_layers) * uint64_t(n_kv_heads) * per_head;
}

void DeviceKvCache::randomize(uint64_t seed, cudaStream_t stream) const {
  kernels::RandomFillParams r;
  r.n = layer_elements_ * n_layers_;
  r.seed = seed;
  if (fp8_) {
    r.byte_mask = 0xbf;  // exponent field below 8: magnitudes < 2, never e4m3's NaN code
    r.out_bytes = k_.get<uint8_t>();
  } else {
    r.out = k_.get<kernels::bf16>();
  }
  check(kernels::random_fill(r, stream), "random_fill");
  r.seed = seed + 1;
  if (fp8_)
    r.out_bytes = v_.get<uint8_t>();
  else
    r.out = v_.get<kernels::bf16>();
  check(kernels::random_fill(r, stream), "random_fill");
  if (!fp8_) return;
  kernels::RandomFillParams s;  // every scale 1
  s.n = scale_stride_ * n_layers_;
  s.scale = 0.0f;
  s.offset = 1.0f;
  for (const DeviceBuffer *b : {&k_scale_, &v_scale_}) {
    s.out_f32 = b->get<float>();
    check(kernels::random_fill(s, stream), "random_fill");
  }
}

}  // namespace vegas::cuda
