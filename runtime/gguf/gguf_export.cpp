#include "gguf/gguf_export.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/parallel_rows.h"
#include "common/small_file.h"
#include "gguf/ggml_quantize.h"
#include "gguf/ggml_types.h"
#include "gguf/gguf_model.h"
#include "gguf/gguf_tokenizer.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "model/rope.h"
#include "model/weight_store.h"
#include "tokenizer/tokenizer.h"

namespace vegas::gguf {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr size_t kMaxTokenizerBytes = size_t{512} << 20;  // as Tokenizer::load reads

const char *arch_name(const ModelConfig &c) {
  switch (c.arch) {
    case Architecture::kQwen3:
      return "qwen3";
    case Architecture::kQwen2:
      return "qwen2";
    default:
      return "llama";  // Mistral too, as llama.cpp's converter writes it
  }
}

// llama.cpp's general.file_type for the matrices' type.
uint32_t file_type(const ExportType &type) {
  if (type.k_m_mix) return type.matrix == kGgmlQ5_K ? 17 : 15;  // MOSTLY_Q5_K_M, MOSTLY_Q4_K_M
  switch (type.matrix) {
    case kGgmlF32:
      return 0;
    case kGgmlF16:
      return 1;
    case kGgmlQ4_0:
      return 2;
    case kGgmlQ8_0:
      return 7;
    case kGgmlQ4_K:
      return 14;  // llama.cpp's MOSTLY_Q4_K_S: every matrix Q4_K
    case kGgmlQ5_K:
      return 16;  // MOSTLY_Q5_K_S
    case kGgmlQ6_K:
      return 18;
    default:
      return 32;  // BF16
  }
}

void rope_metadata(const ModelConfig &c, const std::string &arch, Writer &w) {
  const RopeConfig &r = c.rope;
  w.set_f32(arch + ".rope.freq_base", static_cast<float>(r.theta));
  if (c.rotary_dim() != c.head_dim)
    w.set_u32(arch + ".rope.dimension_count", static_cast<uint32_t>(c.rotary_dim()));
  if (r.type == RopeType::kLinear) {
    w.set_string(arch + ".rope.scaling.type", "linear");
    w.set_f32(arch + ".rope.scaling.factor", static_cast<float>(r.factor));
  } else if (r.type == RopeType::kYarn) {
    if (r.mscale != 0.0 || r.mscale_all_dim != 0.0)
      fail(VEGAS_ERR_UNSUPPORTED, "YaRN with mscale has no GGUF form this writer knows");
    w.set_string(arch + ".rope.scaling.type", "yarn");
    w.set_f32(arch + ".rope.scaling.factor", static_cast<float>(r.factor));
    w.set_u32(arch + ".rope.scaling.original_context_length",
              static_cast<uint32_t>(r.original_max_position));
    w.set_f32(arch + ".rope.scaling.yarn_beta_fast", static_cast<float>(r.beta_fast));
    w.set_f32(arch + ".rope.scaling.yarn_beta_slow", static_cast<float>(r.beta_slow));
    if (r.attention_factor)
      w.set_f32(arch + ".rope.scaling.yarn_attn_factor", static_cast<float>(*r.attention_factor));
  }
}

// Llama 3 scaling travels as rope_freqs.weight: per rotated pair, the divisor
// of the plain frequency that gives the scaled one.
void llama3_rope_freqs(const ModelConfig &c, Writer &w) {
  if (c.rope.type != RopeType::kLlama3) return;
  ModelConfig plain = c;
  plain.rope.type = RopeType::kDefault;
  const std::vector<float> base = rope_inv_freq(plain), scaled = rope_inv_freq(c);
  std::vector<float> factors(base.size());
  for (size_t i = 0; i < base.size(); ++i) factors[i] = base[i] / scaled[i];
  const int64_t n = static_cast<int64_t>(factors.size());
  w.add_tensor("rope_freqs.weight", {n}, kGgmlF32, static_cast<uint64_t>(n) * sizeof(float),
               [factors, n] { return quantize(kGgmlF32, factors.data(), n); });
}

void model_metadata(const ModelConfig &c, const std::string &name, const ExportType &type,
                    Writer &w) {
  if (c.sliding_window > 0)
    fail(VEGAS_ERR_UNSUPPORTED, "sliding-window attention has no GGUF form libvegas reads");
  const std::string arch = arch_name(c);
  w.set_string("general.architecture", arch);
  w.set_string("general.name", name);
  w.set_u32("general.file_type", file_type(type));
  w.set_u32(arch + ".context_length", static_cast<uint32_t>(c.max_position));
  w.set_u32(arch + ".embedding_length", static_cast<uint32_t>(c.hidden_size));
  w.set_u32(arch + ".block_count", static_cast<uint32_t>(c.n_layers));
  w.set_u32(arch + ".feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  w.set_u32(arch + ".attention.head_count", static_cast<uint32_t>(c.n_heads));
  w.set_u32(arch + ".attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  w.set_u32(arch + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.set_u32(arch + ".attention.value_length", static_cast<uint32_t>(c.head_dim));
  w.set_f32(arch + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  rope_metadata(c, arch, w);
}

// The tokenizer metadata of `dir`'s tokenizer: vocabulary and merges from
// tokenizer.json, its ids padded to the embedding's rows with the
// converter's "[PAD<id>]" unused tokens; special ids (else config.json's
// bos/eos), whether it adds bos and the chat template as Tokenizer::load
// reads tokenizer_config.json.
void tokenizer_metadata(const std::string &dir, const ModelConfig &c, Writer &w) {
  const std::string path = dir + "/tokenizer.json";
  if (!fs::exists(path)) return;  // a model without a tokenizer (tests' tiny ones)
  const std::unique_ptr<Tokenizer> tok = Tokenizer::load(dir);  // checks both files
  const json t = json::parse(read_small_file(path, kMaxTokenizerBytes, "tokenizer"));
  const json &model = t.value("model", json::object());
  if (model.value("type", "") != "BPE" || !model.contains("vocab") || !model["vocab"].is_object())
    fail(VEGAS_ERR_UNSUPPORTED, path + ": only byte-level BPE tokenizers can be written to GGUF");
  const std::string pre = gguf_pre_type(t);
  if (pre.empty())
    fail(VEGAS_ERR_UNSUPPORTED, path + ": its pre-tokenizer is none of qwen2, llama-bpe, gpt-2");
  const size_t n = static_cast<size_t>(c.vocab_size);
  std::vector<std::string> tokens(n);
  std::vector<int32_t> types(n, kUnused);  // until named
  auto name = [&](int64_t id, const std::string &text, TokenType type) {
    if (id < 0 || static_cast<size_t>(id) >= n)
      fail(VEGAS_ERR_FORMAT, path + ": token \"" + text + "\" has id " + std::to_string(id) +
                                 " past the model's " + std::to_string(n) + " embeddings");
    tokens[static_cast<size_t>(id)] = text;
    types[static_cast<size_t>(id)] = type;
  };
  for (const auto &[text, id] : model["vocab"].items()) name(id.get<int64_t>(), text, kNormal);
  for (const json &a : t.value("added_tokens", json::array()))
    name(a.value("id", int64_t{-1}), a.value("content", ""),
         a.value("special", false) ? kControl : kUserDefined);
  for (size_t id = 0; id < n; ++id)
    if (types[id] == kUnused) tokens[id] = "[PAD" + std::to_string(id) + "]";
  std::vector<std::string> merges;
  for (const json &m : model.value("merges", json::array()))
    merges.push_back(m.is_string() ? m.get<std::string>()
                                   : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_strings("tokenizer.ggml.tokens", tokens);
  w.set_i32s("tokenizer.ggml.token_type", types);
  w.set_strings("tokenizer.ggml.merges", merges);

  const SpecialTokenIds &special = tok->special_ids();
  const int32_t bos = special.bos >= 0 ? special.bos : c.bos_token_id;
  const int32_t eos = special.eos >= 0 ? special.eos : c.eos_token_id;
  if (bos >= 0) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
  if (eos >= 0) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
  if (special.pad >= 0)
    w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(special.pad));
  // Whether encoding with special tokens puts bos first (add_bos_token or a
  // post-processor that adds it), which is what llama.cpp's key means.
  const std::vector<int32_t> empty = tok->encode("", false, true);
  w.set_bool("tokenizer.ggml.add_bos_token",
             special.bos >= 0 && !empty.empty() && empty.front() == special.bos);
  if (!tok->chat_template().empty()) w.set_string("tokenizer.chat_template", tok->chat_template());
}

// Checkpoint tensor `v` encoded as `type`, rows in the file's order: a
// Llama q or k projection's in llama.cpp's rotary order (rope_head_rows > 0).
// Rows are encoded in parallel.
std::vector<uint8_t> encode(const TensorView &v, uint32_t type, int64_t rope_head_rows) {
  const GgmlTypeInfo &info = *ggml_type_info(type);
  // A vector is one row (a q/k bias is reordered value by value).
  const bool vector = v.shape.size() != 2;
  const int64_t cols = vector ? v.numel() : v.shape[1], rows = vector ? 1 : v.shape[0];
  const int64_t row_bytes = cols / info.block_elems * info.block_bytes;
  const size_t elem = dtype_size(v.dtype);
  std::vector<uint8_t> out(static_cast<size_t>(rows * row_bytes));
  // Checkpoint row (or value, for a vector) i goes to the file's position
  // llama_rope_row(i) of a Llama q or k projection, to i elsewhere.
  auto place = [&](int64_t i) {
    return rope_head_rows > 0 ? llama_rope_row(i, rope_head_rows) : i;
  };
  parallel_rows(rows, [&](int64_t r) {
    TensorView row = v;
    row.shape = {cols};
    row.nbytes = static_cast<size_t>(cols) * elem;
    row.data = static_cast<const uint8_t *>(v.data) + static_cast<size_t>(r * cols) * elem;
    std::vector<float> x(static_cast<size_t>(cols));
    row.to_f32(x.data());
    if (vector) {
      std::vector<float> placed(x.size());
      for (int64_t i = 0; i < cols; ++i)
        placed[static_cast<size_t>(place(i))] = x[static_cast<size_t>(i)];
      x.swap(placed);
    }
    const std::vector<uint8_t> q = quantize(type, x.data(), cols);
    std::copy(q.begin(), q.end(), out.begin() + (vector ? 0 : place(r)) * row_bytes);
  });
  return out;
}

// One checkpoint tensor under its GGUF name, in GGML's dimension order; its
// bytes are made when the writer reaches it (one tensor in memory at a time).
void add_tensor(const TensorView &v, const std::string &name, const ModelConfig &c,
                const ExportType &export_as, Writer &w) {
  const bool q_or_k =
      name.find(".attn_q.") != std::string::npos || name.find(".attn_k.") != std::string::npos;
  const int64_t rope_head_rows =
      arch_name(c) == std::string("llama") && q_or_k ? int64_t{c.head_dim} : 0;
  uint32_t type = v.shape.size() == 2 ? export_tensor_type(export_as, name, c.n_layers) : kGgmlF32;
  if (v.shape.size() == 2 && v.shape[1] % ggml_type_info(type)->block_elems != 0) type = kGgmlF16;
  const GgmlTypeInfo &info = *ggml_type_info(type);
  const uint64_t nbytes =
      static_cast<uint64_t>(v.numel() / info.block_elems) * static_cast<uint64_t>(info.block_bytes);
  const std::vector<int64_t> dims(v.shape.rbegin(), v.shape.rend());
  w.add_tensor(name, dims, type, nbytes,
               [&v, type, rope_head_rows] { return encode(v, type, rope_head_rows); });
}

}  // namespace

ExportType ExportType::q4_k_m() {
  ExportType t(kGgmlQ4_K);
  t.k_m_mix = true;
  return t;
}

ExportType ExportType::q5_k_m() {
  ExportType t(kGgmlQ5_K);
  t.k_m_mix = true;
  return t;
}

ExportType export_type(const std::string &name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (n == "q4_k_m") return ExportType::q4_k_m();
  if (n == "q5_k_m") return ExportType::q5_k_m();
  const std::map<std::string, uint32_t> types = {
      {"f32", kGgmlF32},   {"f16", kGgmlF16},   {"bf16", kGgmlBF16}, {"q8_0", kGgmlQ8_0},
      {"q4_k", kGgmlQ4_K}, {"q5_k", kGgmlQ5_K}, {"q6_k", kGgmlQ6_K}, {"q4_0", kGgmlQ4_0}};
  const auto it = types.find(n);
  if (it == types.end())
    fail(VEGAS_ERR_INVALID_ARGUMENT, "quantize: type '" + name +
                                         "' is not one of f32, f16, bf16, q8_0, q4_0, q4_k, "
                                         "q5_k, q6_k, q4_k_m, q5_k_m");
  return it->second;
}

bool use_more_bits(int32_t i, int32_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

uint32_t export_tensor_type(const ExportType &type, const std::string &gguf_name, int32_t layers) {
  if (!type.k_m_mix) return type.matrix;
  if (gguf_name == "output.weight") return kGgmlQ6_K;
  const bool v_or_down = gguf_name.find(".attn_v.") != std::string::npos ||
                         gguf_name.find(".ffn_down.") != std::string::npos;
  if (!v_or_down || gguf_name.compare(0, 4, "blk.") != 0) return type.matrix;
  return use_more_bits(std::atoi(gguf_name.c_str() + 4), layers) ? kGgmlQ6_K : type.matrix;
}

void export_gguf(const std::string &model_dir, const std::string &out_path,
                 const ExportType &type) {
  if (!quantizable(type.matrix))
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "quantize: GGML type " + std::to_string(type.matrix) + " cannot be written");
  const ModelConfig c = load_model_config(model_dir + "/config.json");
  const std::unique_ptr<WeightStore> store = WeightStore::open(model_dir);
  Writer w;
  model_metadata(c, fs::path(model_dir).filename().string(), type, w);
  tokenizer_metadata(model_dir, c, w);
  llama3_rope_freqs(c, w);
  for (const auto &[hf, view] : store->tensors()) {
    const std::string name = gguf_tensor_name(hf);
    if (name.empty() || (name == "output.weight" && c.tie_word_embeddings)) continue;
    add_tensor(view, name, c, type, w);
  }
  w.write(out_path);
}

}  // namespace vegas::gguf
