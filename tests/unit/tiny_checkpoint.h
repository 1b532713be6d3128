// Test helper: a tiny random checkpoint (config.json + model.safetensors) of any
// supported architecture, with every tensor the config calls for under its
// Hugging Face name. No tokenizer. Values are bf16, uniform in [-0.5, 0.5)
// (norm weights around 1), from a fixed seed.
#pragma once

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model_config.h"
#include "safetensors_writer.h"

namespace vegas::test {

// A small config.json of `architecture` ("Qwen3ForCausalLM", ...) that callers
// may edit before writing.
inline nlohmann::json tiny_config_json(const std::string &architecture) {
  nlohmann::json c = {{"architectures", {architecture}},
                      {"vocab_size", 64},
                      {"hidden_size", 32},
                      {"intermediate_size", 48},
                      {"num_hidden_layers", 2},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"max_position_embeddings", 256},
                      {"rms_norm_eps", 1e-6},
                      {"rope_theta", 10000.0},
                      {"tie_word_embeddings", false},
                      {"bos_token_id", 1},
                      {"eos_token_id", 2}};
  if (architecture == "Qwen3ForCausalLM") c["head_dim"] = 8;
  return c;
}

inline std::vector<FakeTensor> tiny_model_tensors(const ModelConfig &c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
  std::vector<FakeTensor> out;
  auto add = [&](const std::string &name, std::vector<int64_t> shape, float centre) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float &x : v) x = centre + uniform(rng);
    out.push_back(bf16_tensor(name, std::move(shape), v));
  };
  const int64_t h = c.hidden_size, inter = c.intermediate_size, vocab = c.vocab_size;
  add("model.embed_tokens.weight", {vocab, h}, 0.0f);
  for (int32_t i = 0; i < c.n_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {h}, 1.0f);
    add(p + "self_attn.q_proj.weight", {c.q_dim(), h}, 0.0f);
    add(p + "self_attn.k_proj.weight", {c.kv_dim(), h}, 0.0f);
    add(p + "self_attn.v_proj.weight", {c.kv_dim(), h}, 0.0f);
    if (c.attention_bias) {
      add(p + "self_attn.q_proj.bias", {c.q_dim()}, 0.0f);
      add(p + "self_attn.k_proj.bias", {c.kv_dim()}, 0.0f);
      add(p + "self_attn.v_proj.bias", {c.kv_dim()}, 0.0f);
    }
    if (c.qk_norm) {
      add(p + "self_attn.q_norm.weight", {c.head_dim}, 1.0f);
      add(p + "self_attn.k_norm.weight", {c.head_dim}, 1.0f);
    }
    add(p + "self_attn.o_proj.weight", {h, c.q_dim()}, 0.0f);
    if (c.o_bias) add(p + "self_attn.o_proj.bias", {h}, 0.0f);
    add(p + "post_attention_layernorm.weight", {h}, 1.0f);
    add(p + "mlp.gate_proj.weight", {inter, h}, 0.0f);
    add(p + "mlp.up_proj.weight", {inter, h}, 0.0f);
    add(p + "mlp.down_proj.weight", {h, inter}, 0.0f);
    if (c.mlp_bias) {
      add(p + "mlp.gate_proj.bias", {inter}, 0.0f);
      add(p + "mlp.up_proj.bias", {inter}, 0.0f);
      add(p + "mlp.down_proj.bias", {h}, 0.0f);
    }
  }
  add("model.norm.weight", {h}, 1.0f);
  if (!c.tie_word_embeddings) add("lm_head.weight", {vocab, h}, 0.0f);
  return out;
}

// Writes dir/config.json and dir/model.safetensors; returns the parsed config.
inline ModelConfig write_tiny_model(const std::string &dir, const nlohmann::json &config,
                                    uint32_t seed = 1) {
  write_bytes(dir + "/config.json", config.dump(2));
  ModelConfig c = parse_model_config(config.dump(), dir + "/config.json");
  write_safetensors(dir + "/model.safetensors", tiny_model_tensors(c, seed));
  return c;
}

}  // namespace vegas::test
