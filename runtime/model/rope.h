// Rotary position embedding tables, computed as transformers' ROPE_INIT_FUNCTIONS
// do for the rope types libvegas supports (default, linear, llama3, yarn).
// Position p rotates dimension pair i of each head by p * inv_freq[i]; cos and
// sin are then multiplied by rope_attention_scaling(). The CPU and CUDA
// backends both build their tables from these.
#pragma once

#include <vector>

#include "model/model_config.h"

namespace vegas {

// The inverse frequencies, config.rotary_dim() / 2 of them. Computed in float32
// step by step like transformers' CPU path, so they agree with it to about one
// ulp (transformers itself differs by that much between CPU and CUDA).
std::vector<float> rope_inv_freq(const ModelConfig &config);

// The factor applied to cos and sin (yarn's attention factor; 1 otherwise).
float rope_attention_scaling(const ModelConfig &config);

}  // namespace vegas
