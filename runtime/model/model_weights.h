// The tensors of a decoder-only transformer, bound by name for the model's
// architecture (Qwen3, Qwen2, Llama, Mistral all use the HF Llama naming).
#pragma once

#include <vector>

#include "model/model_config.h"
#include "model/weight_store.h"

namespace vegas {

struct LayerWeights {
  const TensorView *attn_norm = nullptr;  // [hidden]
  const TensorView *wq = nullptr;         // [q_dim, hidden]  (HF Linear: [out, in])
  const TensorView *wk = nullptr;         // [kv_dim, hidden]
  const TensorView *wv = nullptr;         // [kv_dim, hidden]
  const TensorView *bq = nullptr;         // [q_dim]  (config.attention_bias only)
  const TensorView *bk = nullptr;         // [kv_dim]
  const TensorView *bv = nullptr;         // [kv_dim]
  const TensorView *q_norm = nullptr;     // [head_dim] (config.qk_norm only)
  const TensorView *k_norm = nullptr;     // [head_dim]
  const TensorView *wo = nullptr;         // [hidden, q_dim]
  const TensorView *bo = nullptr;         // [hidden] (config.o_bias only)
  const TensorView *mlp_norm = nullptr;   // [hidden]
  const TensorView *w_gate = nullptr;     // [intermediate, hidden]
  const TensorView *w_up = nullptr;       // [intermediate, hidden]
  const TensorView *w_down = nullptr;     // [hidden, intermediate]
  const TensorView *b_gate = nullptr;     // [intermediate] (config.mlp_bias only)
  const TensorView *b_up = nullptr;       // [intermediate]
  const TensorView *b_down = nullptr;     // [hidden]
};

struct ModelWeights {
  const TensorView *embed = nullptr;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  const TensorView *final_norm = nullptr;  // [hidden]
  const TensorView *lm_head = nullptr;     // [vocab, hidden]; == embed when tied
};

// Binds and shape-checks every tensor the config needs. Throws FORMAT naming
// the missing or mis-shaped tensor (and both shapes).
ModelWeights bind_model_weights(const ModelConfig &config, const WeightStore &store);

}  // namespace vegas
