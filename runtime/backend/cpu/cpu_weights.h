// The model's weights converted to f32 host arrays, in the HF layouts of
// model_weights.h ([out][in] for projections).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/model_config.h"
#include "model/model_weights.h"

namespace vegas {

struct CpuLayerWeights {
  std::vector<float> attn_norm, wq, wk, wv, bq, bk, bv, q_norm, k_norm, wo;
  std::vector<float> mlp_norm, w_gate, w_up, w_down;  // bq/bk/bv, q_norm/k_norm may be empty
};

struct CpuWeights {
  std::vector<float> embed;  // [vocab][hidden]
  std::vector<CpuLayerWeights> layers;
  std::vector<float> final_norm;
  std::vector<float> lm_head;  // empty when tied: the head is `embed`

  const float *head() const { return lm_head.empty() ? embed.data() : lm_head.data(); }
  uint64_t bytes() const;
};

// Converts and checks every tensor the config needs (FORMAT naming a missing
// or mis-sized tensor; OUT_OF_MEMORY). `progress` may be empty; it gets the
// converted share in [0, 1] and returns false to cancel (CANCELLED).
CpuWeights convert_weights_f32(const ModelConfig &config, const ModelWeights &weights,
                               const std::function<bool(float)> &progress);

}  // namespace vegas
