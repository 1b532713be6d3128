// The model's weights in device memory, bf16, in the layouts the CUDA forward
// pass wants: q|k|v projections stacked into one [q_dim + 2*kv_dim][hidden]
// matrix and gate|up into one [2*inter][hidden] matrix, so each is one GEMM.
// A matrix whose every part came as Q8_0, Q4_0, Q4_K or Q6_K rows of a GGUF
// file stays in those formats instead (kernels/quant_gemv.cuh; parts in
// different formats as row ranges, QuantRows), its bf16 pointer null, in
// models above kSmallModelHidden: smaller ones keep bf16
// for the fused few-row kernels (small_gemm), whose steps wait on kernel
// latency, not on weight bytes. VEGAS_CUDA_QUANT_WEIGHTS=1 keeps them
// quantized at any size, =0 never.
// All tensors live in one allocation.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "quant_gemv.cuh"

namespace vegas::cuda {

using bf16_t = uint16_t;  // device bf16 bits; the kernels see __nv_bfloat16

// Models up to this hidden size run few-row steps through kernels::small_gemm.
constexpr int64_t kSmallModelHidden = 2048;

// A matrix kept quantized, as row ranges in their own formats: a GGUF mix
// such as Q4_K_M stores some layers' v (or down) in Q6_K beside q and k in
// Q4_K. Adjacent parts in one format make one range. No parts: bf16.
struct QuantRows {
  static constexpr int kMaxParts = 3;
  kernels::QuantMatrix part[kMaxParts];
  int32_t row0[kMaxParts] = {};
  int32_t n_parts = 0;
  bool empty() const { return n_parts == 0; }
  int64_t elements() const;  // rows x k of every part
  // Rows [first, first + n) as one matrix, where one part holds them all.
  bool rows_view(int64_t first, int64_t n, kernels::QuantMatrix *view) const;
};

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
  // The same matrices when kept quantized (empty when bf16).
  QuantRows q_wqkv, q_wo, q_gate_up, q_down;
};

using QuantChoice = std::optional<kernels::QuantFormat>;

// Which matrices stay quantized: each as consecutive row ranges with their
// formats (empty: bf16).
struct QuantPart {
  int64_t rows = 0;
  kernels::QuantFormat format = kernels::QuantFormat::kQ8_0;
};
using MatrixPlan = std::vector<QuantPart>;
struct WeightPlan {
  struct Layer {
    MatrixPlan qkv, o, gate_up, down;
  };
  std::vector<Layer> layers;
  MatrixPlan lm_head;  // untied heads only
  bool any() const;
  // Every layer matrix (and an untied head) in `format` (nullopt: bf16).
  static WeightPlan uniform(const ModelConfig &config, QuantChoice format);
  // llama.cpp's Q4_K_M (base Q4_K) and Q5_K_M (base Q5_K) recipes for the
  // matrices kept quantized: the base format, with v and down in Q6_K in its
  // "more bits" layers and the head in Q6_K.
  static WeightPlan k_m(const ModelConfig &config, kernels::QuantFormat base);
};

class DeviceWeights {
 public:
  // Converts and uploads `weights` (any of f32/f16/bf16).
  static DeviceWeights upload(const ModelConfig &config, const ModelWeights &weights);
  // Deterministic pseudo-random weights of `config`'s shapes, made on the
  // device, the matrices kept as `plan` says.
  static DeviceWeights synthetic(const ModelConfig &config, uint64_t seed, const WeightPlan &plan);

  std::vector<DeviceLayer> layers;
  bf16_t *embed = nullptr;         // [vocab][hidden]
  bf16_t *final_norm = nullptr;    // [hidden]
  bf16_t *lm_head = nullptr;       // [vocab][hidden]; == embed when tied
  QuantRows q_lm_head;             // empty when bf16
  float *rope_inv_freq = nullptr;  // [rotary_dim / 2]
  uint64_t bytes = 0;              // weight bytes read by one forward pass (tied counted once)
  bool quantized = false;          // some matrix is kept quantized

 private:
  // Lays out every tensor in one buffer; returns the offsets by assignment
  // to the pointer members.
  void allocate(const ModelConfig &config, const WeightPlan &plan);
  DeviceBuffer storage_;
};

}  // namespace vegas::cuda
