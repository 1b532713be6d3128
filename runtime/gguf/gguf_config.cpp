// model_config_from_gguf: the metadata is rewritten as the config.json the
// converter read, and parse_model_config checks it as it checks any other.
#include <algorithm>

#include "common/error.h"
#include "gguf/ggml_types.h"
#include "gguf/gguf_model.h"

namespace vegas::gguf {

namespace {

using json = nlohmann::json;

struct KnownArchitecture {
  const char *gguf_name;
  const char *hf_class;
  const char *model_type;
};

constexpr KnownArchitecture kArchitectures[] = {
    {"qwen3", "Qwen3ForCausalLM", "qwen3"},
    {"qwen2", "Qwen2ForCausalLM", "qwen2"},
    {"llama", "LlamaForCausalLM", "llama"},
};

const KnownArchitecture &architecture_of(const File &f) {
  const std::string name = f.get_string("general.architecture");
  for (const KnownArchitecture &a : kArchitectures)
    if (name == a.gguf_name) return a;
  fail(VEGAS_ERR_UNSUPPORTED, f.source() + ": architecture '" + name +
                                  "' is not supported (supported: qwen3, qwen2, llama)");
}

// The rope dictionary of config.json (transformers 5's rope_parameters).
json rope_parameters(const File &f, const std::string &arch, int64_t head_dim) {
  auto key = [&](const char *k) { return arch + "." + k; };
  json rp;
  rp["rope_theta"] = f.has(key("rope.freq_base")) ? f.get_float(key("rope.freq_base")) : 10000.0;
  if (f.has(key("rope.dimension_count"))) {
    const int64_t rotated = f.get_int(key("rope.dimension_count"));
    if (rotated != head_dim)
      rp["partial_rotary_factor"] = static_cast<double>(rotated) / static_cast<double>(head_dim);
  }
  const std::string type =
      f.has(key("rope.scaling.type")) ? f.get_string(key("rope.scaling.type")) : "none";
  if (type == "none") {
    rp["rope_type"] = "default";
  } else if (type == "linear") {
    rp["rope_type"] = "linear";
    rp["factor"] = f.get_float(key("rope.scaling.factor"));
  } else if (type == "yarn") {
    rp["rope_type"] = "yarn";
    rp["factor"] = f.get_float(key("rope.scaling.factor"));
    rp["original_max_position_embeddings"] = f.get_int(key("rope.scaling.original_context_length"));
    if (f.has(key("rope.scaling.yarn_beta_fast")))
      rp["beta_fast"] = f.get_float(key("rope.scaling.yarn_beta_fast"));
    if (f.has(key("rope.scaling.yarn_beta_slow")))
      rp["beta_slow"] = f.get_float(key("rope.scaling.yarn_beta_slow"));
    if (f.has(key("rope.scaling.yarn_attn_factor")))
      rp["attention_factor"] = f.get_float(key("rope.scaling.yarn_attn_factor"));
  } else {
    fail(VEGAS_ERR_UNSUPPORTED, f.source() + ": rope scaling '" + type +
                                    "' is not supported (none, linear, yarn; Llama 3's comes as "
                                    "the rope_freqs tensor)");
  }
  return rp;
}

// bos, and every id that ends a turn (eos, eot, eom), as config.json lists them.
void special_ids(const File &f, json *c) {
  if (f.has("tokenizer.ggml.bos_token_id"))
    (*c)["bos_token_id"] = f.get_int("tokenizer.ggml.bos_token_id");
  json eos = json::array();
  for (const char *k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                        "tokenizer.ggml.eom_token_id"}) {
    if (!f.has(k)) continue;
    const int64_t id = f.get_int(k);
    if (std::find(eos.begin(), eos.end(), json(id)) == eos.end()) eos.push_back(id);
  }
  if (!eos.empty()) (*c)["eos_token_id"] = eos;
}

// Llama 3 scaling: a divisor per rotated pair, stored as rope_freqs.weight.
std::vector<float> rope_freq_factors(const File &f) {
  const TensorInfo *t = f.find("rope_freqs.weight");
  if (t == nullptr) return {};
  const GgmlTypeInfo *info = ggml_type_info(t->type);
  if (info == nullptr || !info->dequantizable || t->dims.size() != 1)
    fail(VEGAS_ERR_FORMAT, f.source() + ": rope_freqs.weight is not a vector of numbers");
  std::vector<float> factors(static_cast<size_t>(t->numel()));
  dequantize(t->type, t->data, t->numel(), factors.data());
  for (float x : factors)
    if (!(x > 0.0f) || !(x < 1e30f))
      fail(VEGAS_ERR_FORMAT, f.source() + ": rope_freqs.weight holds a factor that is not > 0");
  return factors;
}

}  // namespace

ModelConfig model_config_from_gguf(const File &f) {
  const KnownArchitecture &a = architecture_of(f);
  const std::string arch = a.gguf_name;
  auto key = [&](const char *k) { return arch + "." + k; };
  json c;
  c["architectures"] = json::array({a.hf_class});
  c["model_type"] = a.model_type;
  const int64_t hidden = f.get_int(key("embedding_length"));
  const int64_t heads = f.get_int(key("attention.head_count"));
  c["hidden_size"] = hidden;
  c["intermediate_size"] = f.get_int(key("feed_forward_length"));
  c["num_hidden_layers"] = f.get_int(key("block_count"));
  c["num_attention_heads"] = heads;
  c["num_key_value_heads"] =
      f.has(key("attention.head_count_kv")) ? f.get_int(key("attention.head_count_kv")) : heads;
  // Always explicit: Qwen3's class default (128) must not apply.
  const int64_t head_dim = f.has(key("attention.key_length"))
                               ? f.get_int(key("attention.key_length"))
                               : (heads > 0 ? hidden / heads : 0);
  c["head_dim"] = head_dim;
  c["max_position_embeddings"] = f.get_int(key("context_length"));
  c["rms_norm_eps"] = f.get_float(key("attention.layer_norm_rms_epsilon"));
  const TensorInfo *embed = f.find("token_embd.weight");
  if (embed == nullptr || embed->dims.size() != 2)
    fail(VEGAS_ERR_FORMAT, f.source() + ": token_embd.weight is missing or not a matrix");
  c["vocab_size"] = embed->dims[1];
  c["tie_word_embeddings"] = f.find("output.weight") == nullptr;
  c["attention_bias"] = f.find("blk.0.attn_q.bias") != nullptr;
  c["mlp_bias"] = f.find("blk.0.ffn_gate.bias") != nullptr;
  c["rope_parameters"] = rope_parameters(f, arch, head_dim);
  special_ids(f, &c);
  ModelConfig config = parse_model_config(c.dump(), f.source());
  config.rope.freq_factors = rope_freq_factors(f);
  if (!config.rope.freq_factors.empty() &&
      config.rope.freq_factors.size() != static_cast<size_t>(config.rotary_dim() / 2))
    fail(VEGAS_ERR_FORMAT, f.source() + ": rope_freqs.weight has " +
                               std::to_string(config.rope.freq_factors.size()) + " factors for " +
                               std::to_string(config.rotary_dim() / 2) + " rotated pairs");
  return config;
}

}  // namespace vegas::gguf
