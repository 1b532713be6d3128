// The model's weights as host arrays, in the HF layouts of model_weights.h
// ([out][in] for projections). Matrices keep bf16 as the file has it (the
// kernels widen each value to f32 as they read it, which is exact), so a bf16
// model takes its file's size in memory, not twice it; other dtypes, and the
// small vectors (norms, biases), become f32.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/model_config.h"
#include "model/model_weights.h"

namespace vegas {

// A weight matrix: bf16 bits, or f32 (exactly one of the two is filled).
struct CpuMatrix {
  std::vector<uint16_t> bf16;
  std::vector<float> f32;

  bool empty() const { return bf16.empty() && f32.empty(); }
  uint64_t bytes() const { return bf16.size() * sizeof(uint16_t) + f32.size() * sizeof(float); }
};

struct CpuLayerWeights {
  // Norms and biases; the biases and q/k norms may be empty.
  std::vector<float> attn_norm, bq, bk, bv, q_norm, k_norm, mlp_norm;
  CpuMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

struct CpuWeights {
  CpuMatrix embed;  // [vocab][hidden]
  std::vector<CpuLayerWeights> layers;
  std::vector<float> final_norm;
  CpuMatrix lm_head;  // empty when tied: the head is `embed`

  const CpuMatrix &head() const { return lm_head.empty() ? embed : lm_head; }
  uint64_t bytes() const;
};

// Converts and checks every tensor the config needs (FORMAT naming a missing
// or mis-sized tensor; OUT_OF_MEMORY). `progress` may be empty; it gets the
// converted share in [0, 1] and returns false to cancel (CANCELLED).
CpuWeights convert_weights(const ModelConfig &config, const ModelWeights &weights,
                           const std::function<bool(float)> &progress);

}  // namespace vegas
