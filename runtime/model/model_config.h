// The architecture-independent description of a decoder-only model, read from
// a Hugging Face config.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vegas {

enum class Architecture { kQwen3, kQwen2, kLlama, kMistral };

enum class RopeType { kDefault, kLinear, kLlama3, kYarn };

const char *rope_type_name(RopeType t);

// The RoPE parameters after transformers' standardisation: `rope_theta` and
// `partial_rotary_factor` moved in from the top level, the pre-scaling context
// (`original_max_position_embeddings`) defaulted to max_position_embeddings.
struct RopeConfig {
  RopeType type = RopeType::kDefault;
  double theta = 10000.0;
  double factor = 1.0;                     // linear, llama3, yarn
  double low_freq_factor = 1.0;            // llama3
  double high_freq_factor = 4.0;           // llama3
  int64_t original_max_position = 0;       // llama3, yarn
  double beta_fast = 32.0;                 // yarn
  double beta_slow = 1.0;                  // yarn
  std::optional<double> attention_factor;  // yarn: cos/sin scale if config.json gives it
  double mscale = 0.0;                     // yarn (DeepSeek style); 0 = absent
  double mscale_all_dim = 0.0;             // yarn; 0 = absent
  bool truncate = true;                    // yarn: round the correction range to integers
  double partial_rotary_factor = 1.0;      // share of head_dim that is rotated
  // Per rotated pair, a divisor of its frequency, given instead of the type's
  // formula: how a GGUF file carries Llama 3 scaling (its rope_freqs tensor).
  std::vector<float> freq_factors;
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
  bool qk_norm = false;         // Qwen3: RMSNorm over each head of q and k before RoPE
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2 always)
  bool o_bias = false;          // o_proj carries a bias (Llama/Qwen3 attention_bias)
  bool mlp_bias = false;        // gate/up/down carry a bias (Llama mlp_bias)
  // Mistral's sliding-window attention span in tokens; 0 = full attention.
  int64_t sliding_window = 0;
  RopeConfig rope;
  int32_t bos_token_id = -1;
  int32_t eos_token_id = -1;           // first of config's eos list, -1 if none
  std::vector<int32_t> eos_token_ids;  // all of them (Llama 3.1 has three)

  int64_t q_dim() const { return int64_t{n_heads} * head_dim; }
  int64_t kv_dim() const { return int64_t{n_kv_heads} * head_dim; }
  // Number of rotated dimensions of each head: int(head_dim * partial_rotary_factor).
  int32_t rotary_dim() const {
    return static_cast<int32_t>(static_cast<double>(head_dim) * rope.partial_rotary_factor);
  }
};

// Parses config.json text; `source` names the file in error messages. Throws
// vegas::Error (FORMAT for missing/absurd fields, UNSUPPORTED for an unknown
// architecture, activation or rope type).
ModelConfig parse_model_config(const std::string &json_text, const std::string &source);
// Reads and parses a config.json file (IO if it cannot be read).
ModelConfig load_model_config(const std::string &path);

}  // namespace vegas
