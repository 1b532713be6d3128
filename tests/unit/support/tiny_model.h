// A tiny random decoder-only model built in memory (f32 tensors), for backend
// tests of every architecture flavour without a checkpoint on disk.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/tensor.h"

namespace vegas::test {

struct TinyFlavour {
  std::string name;
  int32_t n_heads = 4;
  int32_t n_kv_heads = 1;
  int32_t head_dim = 8;
  double partial_rotary = 1.0;
  bool qk_norm = false;
  bool bias = false;
  bool tied = true;
  double theta = 10000.0;
  int32_t hidden = 32;
  int32_t intermediate = 48;
  int32_t vocab = 64;
};

struct TinyModel {
  ModelConfig config;
  ModelWeights weights;
  // Owned storage; deques keep element addresses stable as they grow.
  std::deque<std::vector<float>> data;
  std::deque<TensorView> views;
};

// Uniform values in [center - spread, center + spread] for a tensor of `shape`.
inline const TensorView *tiny_tensor(TinyModel &m, std::mt19937 &rng, const std::string &name,
                                     std::vector<int64_t> shape, float center, float spread) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::uniform_real_distribution<float> u(center - spread, center + spread);
  m.data.emplace_back(static_cast<size_t>(n));
  for (float &v : m.data.back()) v = u(rng);
  TensorView t;
  t.name = name;
  t.dtype = DType::kF32;
  t.shape = std::move(shape);
  t.data = m.data.back().data();
  t.nbytes = static_cast<size_t>(n) * sizeof(float);
  m.views.push_back(std::move(t));
  return &m.views.back();
}

// 2 layers; hidden 32, intermediate 48 and vocab 64 unless the flavour says.
inline TinyModel make_tiny_model(const TinyFlavour &f, uint32_t seed) {
  TinyModel m;
  ModelConfig &c = m.config;
  c.architecture_name = "Tiny-" + f.name;
  c.vocab_size = f.vocab;
  c.hidden_size = f.hidden;
  c.intermediate_size = f.intermediate;
  c.n_layers = 2;
  c.n_heads = f.n_heads;
  c.n_kv_heads = f.n_kv_heads;
  c.head_dim = f.head_dim;
  c.max_position = 4096;
  c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = f.tied;
  c.qk_norm = f.qk_norm;
  c.attention_bias = f.bias;
  c.rope.theta = f.theta;
  c.rope.partial_rotary_factor = f.partial_rotary;

  std::mt19937 rng(seed);
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), in = c.intermediate_size;
  ModelWeights &w = m.weights;
  w.embed = tiny_tensor(m, rng, "model.embed_tokens.weight", {c.vocab_size, h}, 0.f, 1.f);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights lw;
    lw.attn_norm = tiny_tensor(m, rng, p + "input_layernorm.weight", {h}, 1.f, 0.2f);
    lw.wq = tiny_tensor(m, rng, p + "self_attn.q_proj.weight", {q, h}, 0.f, 0.3f);
    lw.wk = tiny_tensor(m, rng, p + "self_attn.k_proj.weight", {kv, h}, 0.f, 0.3f);
    lw.wv = tiny_tensor(m, rng, p + "self_attn.v_proj.weight", {kv, h}, 0.f, 0.3f);
    if (f.bias) {
      lw.bq = tiny_tensor(m, rng, p + "self_attn.q_proj.bias", {q}, 0.f, 0.5f);
      lw.bk = tiny_tensor(m, rng, p + "self_attn.k_proj.bias", {kv}, 0.f, 0.5f);
      lw.bv = tiny_tensor(m, rng, p + "self_attn.v_proj.bias", {kv}, 0.f, 0.5f);
    }
    if (f.qk_norm) {
      lw.q_norm = tiny_tensor(m, rng, p + "self_attn.q_norm.weight", {c.head_dim}, 1.f, 0.3f);
      lw.k_norm = tiny_tensor(m, rng, p + "self_attn.k_norm.weight", {c.head_dim}, 1.f, 0.3f);
    }
    lw.wo = tiny_tensor(m, rng, p + "self_attn.o_proj.weight", {h, q}, 0.f, 0.3f);
    lw.mlp_norm = tiny_tensor(m, rng, p + "post_attention_layernorm.weight", {h}, 1.f, 0.2f);
    lw.w_gate = tiny_tensor(m, rng, p + "mlp.gate_proj.weight", {in, h}, 0.f, 0.3f);
    lw.w_up = tiny_tensor(m, rng, p + "mlp.up_proj.weight", {in, h}, 0.f, 0.3f);
    lw.w_down = tiny_tensor(m, rng, p + "mlp.down_proj.weight", {h, in}, 0.f, 0.3f);
    w.layers.push_back(lw);
  }
  w.final_norm = tiny_tensor(m, rng, "model.norm.weight", {h}, 1.f, 0.2f);
  w.lm_head =
      f.tied ? w.embed : tiny_tensor(m, rng, "lm_head.weight", {c.vocab_size, h}, 0.f, 0.5f);
  return m;
}

}  // namespace vegas::test
