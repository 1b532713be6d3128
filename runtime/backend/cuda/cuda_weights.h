// The model's weights in device memory, bf16, in the layouts the CUDA forward
// pass wants: q|k|v projections stacked into one [q_dim + 2*kv_dim][hidden]
// matrix and gate|up into one [2*inter][hidden] matrix, so each is one GEMM.
// All tensors live in one allocation.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace vegas::cuda {

using bf16_t = uint16_t;  // device bf16 bits; the kernels see __nv_bfloat16

struct DeviceLayer {
  bf16_t *attn_norm = nullptr;  // [hidden]
  bf16_t *wqkv = nullptr;       // [q_dim + 2 kv_dim][hidden]
  bf16_t *bqkv = nullptr;       // [q_dim + 2 kv_dim] or null
  bf16_t *q_norm = nullptr;     // [head_dim] or null
  bf16_t *k_norm = nullptr;
  bf16_t *wo = nullptr;         // [hidden][q_dim]
  bf16_t *mlp_norm = nullptr;   // [hidden]
  bf16_t *w_gate_up = nullptr;  // [2 inter][hidden]
  bf16_t *w_down = nullptr;     // [hidden][inter]
};

class DeviceWeights {
 public:
  // Converts and uploads `weights` (any of f32/f16/bf16).
  static DeviceWeights upload(const ModelConfig &config, const ModelWeights &weights);
  // Deterministic pseudo-random weights of `config`'s shapes, made on the device.
  static DeviceWeights synthetic(const ModelConfig &config, uint64_t seed);

  std::vector<DeviceLayer> layers;
  bf16_t *embed = nullptr;         // [vocab][hidden]
  bf16_t *final_norm = nullptr;    // [hidden]
  bf16_t *lm_head = nullptr;       // [vocab][hidden]; == embed when tied
  float *rope_inv_freq = nullptr;  // [rotary_dim / 2]
  uint64_t bytes = 0;              // weight bytes read by one forward pass (tied counted once)

 private:
  // Lays out every tensor in one buffer; returns the offsets by assignment
  // to the pointer members.
  void allocate(const ModelConfig &config);
  DeviceBuffer storage_;
};

}  // namespace vegas::cuda
