// weights_from_gguf: llama.cpp's tensor names to Hugging Face's, GGML's
// [in, out] dimension order to [out, in], quantized blocks to bf16.
#include <cstring>
#include <map>
#include <utility>

#include "common/bf16.h"
#include "common/error.h"
#include "common/parallel_rows.h"
#include "gguf/ggml_repack.h"
#include "gguf/ggml_types.h"
#include "gguf/gguf_model.h"

namespace vegas::gguf {

namespace {

// The part of a tensor name after "blk.N." and its Hugging Face counterpart
// after "model.layers.N.".
const std::map<std::string, std::string> &layer_names() {
  static const std::map<std::string, std::string> names = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_output.bias", "self_attn.o_proj.bias"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_gate.bias", "mlp.gate_proj.bias"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_up.bias", "mlp.up_proj.bias"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
      {"ffn_down.bias", "mlp.down_proj.bias"},
  };
  return names;
}

// The Hugging Face name of a GGUF tensor, empty for one the runtime does not
// bind (rope_freqs, which the config reads, or another model's tensors).
std::string hf_name(const std::string &name) {
  if (name == "token_embd.weight") return "model.embed_tokens.weight";
  if (name == "output_norm.weight") return "model.norm.weight";
  if (name == "output.weight") return "lm_head.weight";
  if (name.compare(0, 4, "blk.") != 0) return {};
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4) return {};
  const std::string layer = name.substr(4, dot - 4);
  if (layer.find_first_not_of("0123456789") != std::string::npos) return {};
  const auto it = layer_names().find(name.substr(dot + 1));
  if (it == layer_names().end()) return {};
  return "model.layers." + layer + "." + it->second;
}

struct Conversion {
  const TensorInfo *tensor;
  TensorView view;
  int64_t rope_head_rows = 0;  // > 0: undo llama.cpp's rotary row order
};

// A tensor the loader must rewrite (dequantize or reorder) into its own
// buffer: bf16 for quantized types, the same type otherwise. Rows of the
// types a GPU kernel reads (kernel_readable) are kept beside it for the
// backends that compute on them (reordered too where the rows are). The buffers go to `owners`.
void convert(Conversion &c, std::vector<std::shared_ptr<const void>> *owners) {
  const TensorInfo &t = *c.tensor;
  const GgmlTypeInfo &info = *ggml_type_info(t.type);
  // A q/k bias is reordered value by value: rows of one value.
  const bool reorder_values = t.dims.size() == 1 && c.rope_head_rows > 0;
  const int64_t cols = reorder_values ? 1 : t.dims[0], rows = t.numel() / cols;
  const int64_t row_bytes = cols / info.block_elems * info.block_bytes;
  auto source_row = [&](int64_t r) {
    return t.data + (c.rope_head_rows > 0 ? llama_rope_row(r, c.rope_head_rows) : r) * row_bytes;
  };
  const bool quantized = info.block_elems > 1;  // view_dtype made these bf16
  const int64_t out_row_bytes = cols * static_cast<int64_t>(dtype_size(c.view.dtype));
  auto out = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * out_row_bytes));
  parallel_rows(rows, [&](int64_t r) {
    uint8_t *dst = out->data() + r * out_row_bytes;
    if (!quantized) {
      std::memcpy(dst, source_row(r), static_cast<size_t>(row_bytes));
      return;
    }
    std::vector<float> values(static_cast<size_t>(cols));
    dequantize(t.type, source_row(r), cols, values.data());
    uint16_t *bf = reinterpret_cast<uint16_t *>(dst);
    for (int64_t i = 0; i < cols; ++i) bf[i] = f32_to_bf16(values[static_cast<size_t>(i)]);
  });
  c.view.data = out->data();
  c.view.nbytes = out->size();
  owners->push_back(out);
  if (!kernel_readable(t.type)) return;
  c.view.ggml_type = t.type;
  c.view.ggml_blocks = t.data;
  if (c.rope_head_rows == 0) return;
  auto raw = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * row_bytes));
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(raw->data() + r * row_bytes, source_row(r), static_cast<size_t>(row_bytes));
  c.view.ggml_blocks = raw->data();
  owners->push_back(raw);
}

DType view_dtype(uint32_t type) {
  if (type == kGgmlF32) return DType::kF32;
  if (type == kGgmlF16) return DType::kF16;
  return DType::kBF16;  // BF16, and what quantized types become
}

}  // namespace

int64_t llama_rope_row(int64_t r, int64_t head_rows) {
  const int64_t head = r / head_rows, i = r % head_rows, half = head_rows / 2;
  return head * head_rows + (i < half ? 2 * i : 2 * (i - half) + 1);
}

std::string gguf_tensor_name(const std::string &hf) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string prefix = "model.layers.";
  if (hf.compare(0, prefix.size(), prefix) != 0) return {};
  const size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return {};
  const std::string rest = hf.substr(dot + 1);
  for (const auto &[gguf, hf_rest] : layer_names())
    if (hf_rest == rest) return "blk." + hf.substr(prefix.size(), dot - prefix.size()) + "." + gguf;
  return {};
}

std::unique_ptr<WeightStore> weights_from_gguf(std::shared_ptr<const File> file,
                                               const ModelConfig &config) {
  std::map<std::string, TensorView> tensors;
  std::vector<std::shared_ptr<const void>> owners{file};
  // llama.cpp permutes Llama's q/k rows only (Qwen's rotary halves are
  // already what its kernels read).
  const bool llama_rows = config.arch == Architecture::kLlama;
  for (const TensorInfo &t : file->tensors()) {
    const std::string name = hf_name(t.name);
    if (name.empty()) continue;
    const GgmlTypeInfo &info = *ggml_type_info(t.type);
    if (!info.dequantizable)
      fail(VEGAS_ERR_UNSUPPORTED, file->source() + ": tensor " + t.name + " has type " + info.name +
                                      ", which libvegas does not read (F32, F16, BF16, Q4_0, "
                                      "Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)");
    Conversion c{&t, {}, 0};
    c.view.name = name;
    c.view.dtype = view_dtype(t.type);
    c.view.shape.assign(t.dims.rbegin(), t.dims.rend());
    c.view.data = t.data;
    c.view.nbytes = static_cast<size_t>(t.nbytes);
    const bool q_or_k = name.find("self_attn.q_proj.") != std::string::npos ||
                        name.find("self_attn.k_proj.") != std::string::npos;
    if (llama_rows && q_or_k) c.rope_head_rows = config.head_dim;
    if (c.rope_head_rows > 0 &&
        (c.view.shape[0] % c.rope_head_rows != 0 || c.rope_head_rows % 2 != 0 ||
         (t.dims.size() == 1 && info.block_elems > 1)))
      fail(VEGAS_ERR_FORMAT, file->source() + ": tensor " + t.name + " has " +
                                 std::to_string(c.view.shape[0]) + " rows, not whole heads of " +
                                 std::to_string(c.rope_head_rows));
    if (info.block_elems > 1 || c.rope_head_rows > 0) convert(c, &owners);
    tensors.emplace(name, std::move(c.view));
  }
  return WeightStore::adopt(std::move(tensors), std::move(owners), file->source());
}

}  // namespace vegas::gguf
