// config.json → ModelConfig. Defaults follow each architecture's transformers
// configuration class (transformers 5), so a config.json that transformers loads
// describes the same model here; every size is range-checked because a model
// directory is untrusted input.
#include "model/model_config.h"

#include <cmath>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/json_depth.h"
#include "common/small_file.h"

namespace vegas {

namespace {

using json = nlohmann::json;

// Far above any released model; a larger value means a corrupt or hostile file.
constexpr int64_t kMaxVocab = 10'000'000;
constexpr int64_t kMaxHidden = 1 << 17;
constexpr int64_t kMaxIntermediate = 1 << 20;
constexpr int64_t kMaxLayers = 1000;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxHeadDim = 1024;
constexpr int64_t kMaxPosition = int64_t{1} << 28;
constexpr int64_t kMaxTokenId = std::numeric_limits<int32_t>::max();

// Typed, range-checked access to one JSON object; errors name the file and key.
class Fields {
 public:
  Fields(const json &object, std::string source, std::string prefix)
      : j_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  // Present and not null.
  bool has(const char *key) const {
    auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }
  const json &at(const char *key) const { return j_.at(key); }

  [[noreturn]] void bad(const char *key, const std::string &what) const {
    fail(VEGAS_ERR_FORMAT, source_ + ": field '" + prefix_ + key + "' " + what);
  }

  int64_t integer(const char *key, int64_t lo, int64_t hi) const {
    if (!has(key)) bad(key, "is missing");
    return check_integer(key, j_.at(key), lo, hi);
  }
  int64_t integer_or(const char *key, int64_t fallback, int64_t lo, int64_t hi) const {
    return has(key) ? integer(key, lo, hi) : fallback;
  }

  double number(const char *key) const {
    if (!has(key)) bad(key, "is missing");
    const json &v = j_.at(key);
    if (!v.is_number()) bad(key, "must be a number, got " + v.dump());
    const double d = v.get<double>();
    if (!std::isfinite(d)) bad(key, "must be finite, got " + v.dump());
    return d;
  }
  double number_or(const char *key, double fallback) const {
    return has(key) ? number(key) : fallback;
  }
  // A number > lo (or >= lo when inclusive).
  double number_above(const char *key, double lo) const {
    const double d = number(key);
    if (!(d > lo)) bad(key, "must be > " + format(lo) + ", got " + format(d));
    return d;
  }

  bool boolean_or(const char *key, bool fallback) const {
    if (!has(key)) return fallback;
    const json &v = j_.at(key);
    if (!v.is_boolean()) bad(key, "must be true or false, got " + v.dump());
    return v.get<bool>();
  }

  std::string string_or(const char *key, const std::string &fallback) const {
    if (!has(key)) return fallback;
    const json &v = j_.at(key);
    if (!v.is_string()) bad(key, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }

  int64_t check_integer(const char *key, const json &v, int64_t lo, int64_t hi) const {
    int64_t n = 0;
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
        bad(key, "is absurdly large: " + v.dump() + " (limit " + std::to_string(hi) + ")");
      n = v.get<int64_t>();
    } else if (v.is_number_float() && std::isfinite(v.get<double>()) &&
               v.get<double>() == std::floor(v.get<double>()) &&
               std::fabs(v.get<double>()) < 9e18) {
      n = static_cast<int64_t>(v.get<double>());  // e.g. 4096.0 written by some exporters
    } else {
      bad(key, "must be an integer, got " + v.dump());
    }
    if (n < lo) bad(key, "must be >= " + std::to_string(lo) + ", got " + std::to_string(n));
    if (n > hi)
      bad(key, "is absurdly large: " + std::to_string(n) + " (limit " + std::to_string(hi) + ")");
    return n;
  }

  static std::string format(double d) {
    std::ostringstream s;
    s << d;
    return s.str();
  }

 private:
  const json &j_;
  std::string source_;
  std::string prefix_;
};

struct ArchInfo {
  const char *class_name;
  const char *model_type;
  Architecture arch;
};
constexpr ArchInfo kArchitectures[] = {
    {"Qwen3ForCausalLM", "qwen3", Architecture::kQwen3},
    {"Qwen2ForCausalLM", "qwen2", Architecture::kQwen2},
    {"LlamaForCausalLM", "llama", Architecture::kLlama},
    {"MistralForCausalLM", "mistral", Architecture::kMistral},
};

void parse_architecture(const Fields &f, const std::string &source, ModelConfig &c) {
  std::string supported;
  for (const ArchInfo &a : kArchitectures)
    supported += std::string(supported.empty() ? "" : ", ") + a.class_name;
  if (f.has("architectures")) {
    const json &list = f.at("architectures");
    if (!list.is_array() || list.empty() || !list[0].is_string())
      f.bad("architectures", "must be a non-empty list of class names, got " + list.dump());
    const std::string name = list[0].get<std::string>();
    for (const ArchInfo &a : kArchitectures) {
      if (name == a.class_name) {
        c.arch = a.arch;
        c.architecture_name = name;
        return;
      }
    }
    fail(VEGAS_ERR_UNSUPPORTED,
         source + ": architecture '" + name + "' is not supported (supported: " + supported + ")");
  }
  // No class list (hand-written configs): fall back on model_type.
  const std::string type = f.string_or("model_type", "");
  if (type.empty()) f.bad("architectures", "is missing (and so is model_type)");
  for (const ArchInfo &a : kArchitectures) {
    if (type == a.model_type) {
      c.arch = a.arch;
      c.architecture_name = a.class_name;
      return;
    }
  }
  fail(VEGAS_ERR_UNSUPPORTED,
       source + ": model_type '" + type + "' is not supported (supported: " + supported + ")");
}

// bos/eos: an id, a list of ids, or null.
std::vector<int32_t> parse_token_ids(const Fields &f, const char *key) {
  std::vector<int32_t> ids;
  if (!f.has(key)) return ids;
  const json &v = f.at(key);
  if (v.is_array()) {
    for (const json &e : v)
      ids.push_back(static_cast<int32_t>(f.check_integer(key, e, 0, kMaxTokenId)));
  } else {
    ids.push_back(static_cast<int32_t>(f.check_integer(key, v, 0, kMaxTokenId)));
  }
  return ids;
}

// The rope dictionary: transformers takes `rope_scaling` (older configs) over
// `rope_parameters` (transformers 5), and either may be nested per layer type.
const json *find_rope_dict(const Fields &top) {
  const char *key = top.has("rope_scaling")      ? "rope_scaling"
                    : top.has("rope_parameters") ? "rope_parameters"
                                                 : nullptr;
  if (key == nullptr) return nullptr;
  const json *rp = &top.at(key);
  if (!rp->is_object()) top.bad(key, "must be an object, got " + rp->dump());
  auto nested = rp->find("full_attention");
  if (nested != rp->end() && nested->is_object()) rp = &*nested;
  return rp;
}

RopeType parse_rope_type(const Fields &rp, const std::string &source) {
  std::string type = "default";
  if (rp.has("rope_type"))
    type = rp.string_or("rope_type", type);
  else if (rp.has("type"))
    type = rp.string_or("type", type);
  if (type == "default") return RopeType::kDefault;
  if (type == "linear") return RopeType::kLinear;
  if (type == "llama3") return RopeType::kLlama3;
  if (type == "yarn") return RopeType::kYarn;
  fail(VEGAS_ERR_UNSUPPORTED, source + ": rope type '" + type +
                                  "' is not supported (supported: default, linear, llama3, yarn)");
}

// rope_theta and partial_rotary_factor: inside the dict first, then top level.
void parse_rope_base(const Fields &top, const Fields &rp, RopeConfig &r) {
  if (rp.has("rope_theta"))
    r.theta = rp.number_above("rope_theta", 1.0);
  else if (top.has("rope_theta"))
    r.theta = top.number_above("rope_theta", 1.0);
  const Fields &prf_src = rp.has("partial_rotary_factor") ? rp : top;
  if (prf_src.has("partial_rotary_factor")) {
    r.partial_rotary_factor = prf_src.number_above("partial_rotary_factor", 0.0);
    if (r.partial_rotary_factor > 1.0)
      prf_src.bad("partial_rotary_factor",
                  "must be <= 1, got " + Fields::format(r.partial_rotary_factor));
  }
}

void parse_llama3(const Fields &rp, RopeConfig &r) {
  r.factor = rp.number_above("factor", 0.0);
  r.low_freq_factor = rp.number_above("low_freq_factor", 0.0);
  r.high_freq_factor = rp.number_above("high_freq_factor", 0.0);
  if (!(r.high_freq_factor > r.low_freq_factor))
    rp.bad("high_freq_factor", "must be greater than low_freq_factor (" +
                                   Fields::format(r.low_freq_factor) + "), got " +
                                   Fields::format(r.high_freq_factor));
}

void parse_yarn(const Fields &rp, int64_t max_position, RopeConfig &r) {
  // A null factor means "the ratio of the two context lengths".
  r.factor = rp.has("factor")
                 ? rp.number_above("factor", 0.0)
                 : static_cast<double>(max_position) / static_cast<double>(r.original_max_position);
  if (rp.has("attention_factor")) r.attention_factor = rp.number_above("attention_factor", 0.0);
  // transformers reads these as `value or default`: 0 means the default too.
  const double beta_fast = rp.number_or("beta_fast", 0.0);
  const double beta_slow = rp.number_or("beta_slow", 0.0);
  r.beta_fast = beta_fast != 0.0 ? beta_fast : 32.0;
  r.beta_slow = beta_slow != 0.0 ? beta_slow : 1.0;
  if (!(r.beta_fast > 0.0) || !(r.beta_slow > 0.0))
    rp.bad("beta_fast", "and beta_slow must be positive");
  r.mscale = rp.number_or("mscale", 0.0);
  r.mscale_all_dim = rp.number_or("mscale_all_dim", 0.0);
  r.truncate = rp.boolean_or("truncate", true);
}

void parse_rope(const Fields &top, const std::string &source, ModelConfig &c) {
  RopeConfig &r = c.rope;
  const json *dict = find_rope_dict(top);
  static const json kEmpty = json::object();
  const Fields rp(dict != nullptr ? *dict : kEmpty, source,
                  top.has("rope_scaling") ? "rope_scaling." : "rope_parameters.");
  r.type = parse_rope_type(rp, source);
  parse_rope_base(top, rp, r);
  if (r.type == RopeType::kDefault) return;
  if (r.type == RopeType::kLinear) {
    r.factor = rp.number_above("factor", 0.0);
    return;
  }
  // llama3 and yarn scale relative to the pre-training context. A top-level
  // original_max_position_embeddings wins (transformers' Phi3 exception).
  if (top.has("original_max_position_embeddings"))
    r.original_max_position = top.integer("original_max_position_embeddings", 1, kMaxPosition);
  else
    r.original_max_position =
        rp.integer_or("original_max_position_embeddings", c.max_position, 1, kMaxPosition);
  if (r.type == RopeType::kLlama3)
    parse_llama3(rp, r);
  else
    parse_yarn(rp, c.max_position, r);
}

void check_attention_layout(const Fields &f, const std::string &source, const ModelConfig &c) {
  if (f.has("layer_types")) {
    const json &types = f.at("layer_types");
    if (!types.is_array()) f.bad("layer_types", "must be a list");
    for (const json &t : types) {
      if (!t.is_string()) f.bad("layer_types", "must be a list of strings");
      if (t.get<std::string>() != "full_attention")
        fail(VEGAS_ERR_UNSUPPORTED, source + ": layer type '" + t.get<std::string>() +
                                        "' is not supported (only full_attention)");
    }
  }
  if ((c.arch == Architecture::kQwen2 || c.arch == Architecture::kQwen3) &&
      f.boolean_or("use_sliding_window", false) && f.has("sliding_window"))
    fail(VEGAS_ERR_UNSUPPORTED, source + ": use_sliding_window is not supported");
  const std::string act = f.string_or("hidden_act", "silu");
  if (act != "silu" && act != "swish")
    fail(VEGAS_ERR_UNSUPPORTED, source + ": hidden_act '" + act + "' is not supported (only silu)");
}

// Quantized checkpoints: the FP8 ones load (model/fp8_weights.h); refuse the
// others by name rather than at their first integer tensor.
void check_quantization(const Fields &f, const std::string &source) {
  if (!f.has("quantization_config")) return;
  const json &q = f.at("quantization_config");
  if (!q.is_object()) f.bad("quantization_config", "must be an object");
  const std::string method = q.contains("quant_method") && q["quant_method"].is_string()
                                 ? q["quant_method"].get<std::string>()
                                 : std::string();
  const std::string format =
      q.contains("format") && q["format"].is_string() ? q["format"].get<std::string>() : "";
  const bool fp8 = method == "fp8" || (method == "compressed-tensors" &&
                                       (format == "float-quantized" || format.empty()));
  if (!fp8)
    fail(VEGAS_ERR_UNSUPPORTED,
         source + ": quantization_config quant_method '" + method +
             (format.empty() ? "" : "' format '" + format) +
             "' is not supported (FP8 checkpoints load: quant_method fp8, or compressed-tensors "
             "float-quantized; GGUF files for the others)");
}

}  // namespace

const char *rope_type_name(RopeType t) {
  switch (t) {
    case RopeType::kDefault:
      return "default";
    case RopeType::kLinear:
      return "linear";
    case RopeType::kLlama3:
      return "llama3";
    case RopeType::kYarn:
      return "yarn";
  }
  return "?";
}

namespace {

// The document's top level, which must be a JSON object.
json parse_object(const std::string &json_text, const std::string &source) {
  check_json_depth(json_text, source);
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception &e) {
    fail(VEGAS_ERR_FORMAT, source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) fail(VEGAS_ERR_FORMAT, source + ": top level must be a JSON object");
  return j;
}

// The vocabulary, widths, layer and head counts and head_dim.
void parse_shape(const json &j, const Fields &f, ModelConfig &c) {
  c.vocab_size = static_cast<int32_t>(f.integer("vocab_size", 1, kMaxVocab));
  c.hidden_size = static_cast<int32_t>(f.integer("hidden_size", 1, kMaxHidden));
  c.intermediate_size = static_cast<int32_t>(f.integer("intermediate_size", 1, kMaxIntermediate));
  c.n_layers = static_cast<int32_t>(f.integer("num_hidden_layers", 1, kMaxLayers));
  c.n_heads = static_cast<int32_t>(f.integer("num_attention_heads", 1, kMaxHeads));

  // An absent key takes the transformers class default (Qwen 32, Mistral 8,
  // Llama = num_attention_heads); an explicit null means num_attention_heads.
  const int64_t kv_default = c.arch == Architecture::kLlama     ? c.n_heads
                             : c.arch == Architecture::kMistral ? 8
                                                                : 32;
  if (j.contains("num_key_value_heads") && j["num_key_value_heads"].is_null())
    c.n_kv_heads = c.n_heads;
  else
    c.n_kv_heads =
        static_cast<int32_t>(f.integer_or("num_key_value_heads", kv_default, 1, kMaxHeads));
  if (c.n_heads % c.n_kv_heads != 0)
    f.bad("num_attention_heads", "(" + std::to_string(c.n_heads) +
                                     ") is not a multiple of num_key_value_heads (" +
                                     std::to_string(c.n_kv_heads) + ")");

  // head_dim: Qwen3's class default is 128; the others derive it.
  if (f.has("head_dim")) {
    c.head_dim = static_cast<int32_t>(f.integer("head_dim", 1, kMaxHeadDim));
  } else if (c.arch == Architecture::kQwen3) {
    c.head_dim = 128;
  } else {
    if (c.hidden_size % c.n_heads != 0)
      f.bad("hidden_size", "(" + std::to_string(c.hidden_size) +
                               ") is not divisible by num_attention_heads (" +
                               std::to_string(c.n_heads) + ") and head_dim is not given");
    c.head_dim = c.hidden_size / c.n_heads;
  }
}

// The context length, the norms' epsilon and whether the embeddings are tied.
void parse_limits(const Fields &f, ModelConfig &c) {
  const int64_t max_pos_default = c.arch == Architecture::kLlama     ? 2048
                                  : c.arch == Architecture::kMistral ? 4096 * 32
                                                                     : 32768;
  c.max_position = f.integer_or("max_position_embeddings", max_pos_default, 1, kMaxPosition);
  c.rms_norm_eps = f.number_or("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0.0) || !(c.rms_norm_eps < 1.0))
    f.bad("rms_norm_eps", "must be in (0, 1), got " + Fields::format(c.rms_norm_eps));
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", false);
}

// What each architecture's attention and MLP carry: q/k norms, biases and
// Mistral's sliding window.
void parse_attention_kind(const json &j, const Fields &f, ModelConfig &c) {
  switch (c.arch) {
    case Architecture::kQwen3:
      c.qk_norm = true;
      c.attention_bias = c.o_bias = f.boolean_or("attention_bias", false);
      break;
    case Architecture::kQwen2:  // q/k/v always carry a bias, o_proj never
      c.attention_bias = true;
      break;
    case Architecture::kLlama:
      c.attention_bias = c.o_bias = f.boolean_or("attention_bias", false);
      c.mlp_bias = f.boolean_or("mlp_bias", false);
      break;
    case Architecture::kMistral:  // no biases; sliding window unless null
      if (!j.contains("sliding_window"))
        c.sliding_window = 4096;
      else if (!j["sliding_window"].is_null())
        c.sliding_window = f.integer("sliding_window", 1, kMaxPosition);
      break;
  }
}

}  // namespace

ModelConfig parse_model_config(const std::string &json_text, const std::string &source) {
  const json j = parse_object(json_text, source);
  const Fields f(j, source, "");
  ModelConfig c;
  parse_architecture(f, source, c);
  check_quantization(f, source);
  parse_shape(j, f, c);
  parse_limits(f, c);
  parse_attention_kind(j, f, c);
  check_attention_layout(f, source, c);

  parse_rope(f, source, c);
  const int32_t rot = c.rotary_dim();
  if (rot < 2 || rot % 2 != 0)
    f.bad("head_dim", "times partial_rotary_factor must give an even rotary dimension >= 2, got " +
                          std::to_string(rot));

  const std::vector<int32_t> bos = parse_token_ids(f, "bos_token_id");
  if (!bos.empty()) c.bos_token_id = bos[0];
  c.eos_token_ids = parse_token_ids(f, "eos_token_id");
  if (!c.eos_token_ids.empty()) c.eos_token_id = c.eos_token_ids[0];
  return c;
}

ModelConfig load_model_config(const std::string &path) {
  constexpr size_t kMaxConfigBytes = size_t{16} << 20;  // real ones: a few KB
  return parse_model_config(read_small_file(path, kMaxConfigBytes, "model config"), path);
}

}  // namespace vegas
