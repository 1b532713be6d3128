// The architecture-independent description of a decoder-only model, read from
// a Hugging Face config.json.
#pragma once

#include <cstdint>
#include <string>

namespace vegas {

enum class Architecture { kQwen3, kQwen2, kLlama, kMistral };

enum class RopeType { kDefault, kLinear, kLlama3, kYarn };

struct RopeConfig {
  RopeType type = RopeType::kDefault;
  double theta = 10000.0;
  double factor = 1.0;                    // linear, llama3, yarn
  double low_freq_factor = 1.0;           // llama3
  double high_freq_factor = 4.0;          // llama3
  int64_t original_max_position = 8192;   // llama3, yarn
  double beta_fast = 32.0;                // yarn
  double beta_slow = 1.0;                 // yarn
  double attention_factor = 1.0;          // yarn: scales cos/sin (HF "mscale"); 1 = derived default
  bool attention_factor_given = false;    // yarn: attention_factor came from config.json
  double partial_rotary_factor = 1.0;     // share of head_dim that is rotated
};

struct ModelConfig {
  Architecture arch = Architecture::kQwen3;
  std::string architecture_name;  // e.g. "Qwen3ForCausalLM"
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int64_t max_position = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qk_norm = false;       // Qwen3: RMSNorm over each head of q and k before RoPE
  bool attention_bias = false;  // Qwen2: q/k/v projections carry a bias
  bool mlp_bias = false;
  RopeConfig rope;
  int32_t bos_token_id = -1;
  int32_t eos_token_id = -1;  // first of config's eos list

  int64_t q_dim() const { return int64_t{n_heads} * head_dim; }
  int64_t kv_dim() const { return int64_t{n_kv_heads} * head_dim; }
};

// Parses config.json text; `source` names the file in error messages. Throws
// vegas::Error (FORMAT for missing/absurd fields, UNSUPPORTED for an unknown
// architecture or rope type).
ModelConfig parse_model_config(const std::string &json_text, const std::string &source);
ModelConfig load_model_config(const std::string &path);

}  // namespace vegas
