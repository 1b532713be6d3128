#include "backend/cpu/cpu_weights.h"

#include <cstring>
#include <new>
#include <string>

#include "common/error.h"

namespace vegas {
namespace {

// Walks the tensors twice: once to count elements (for progress), once to convert.
class Converter {
 public:
  Converter(const std::function<bool(float)> &progress, bool counting)
      : progress_(progress), counting_(counting) {}

  void set_total(int64_t total) { total_ = total; }
  int64_t counted() const { return done_; }

  // Converts `t` (required unless `optional`) expected to hold `numel` elements.
  void convert(const TensorView *t, int64_t numel, const char *what, std::vector<float> &out,
               bool optional = false) {
    if (!check(t, numel, what, optional)) return;
    allocate(out, numel, sizeof(float), t->name);
    t->to_f32(out.data());
    report();
  }
  // A matrix: bf16 kept as it is, any other dtype converted to f32.
  void convert(const TensorView *t, int64_t numel, const char *what, CpuMatrix &out) {
    if (!check(t, numel, what, false)) return;
    if (t->dtype == DType::kBF16) {
      allocate(out.bf16, numel, sizeof(uint16_t), t->name);
      std::memcpy(out.bf16.data(), t->data, static_cast<size_t>(numel) * sizeof(uint16_t));
    } else {
      allocate(out.f32, numel, sizeof(float), t->name);
      t->to_f32(out.f32.data());
    }
    report();
  }

 private:
  // Whether to convert (false: counting, or an absent optional tensor).
  bool check(const TensorView *t, int64_t numel, const char *what, bool optional) {
    if (t == nullptr) {
      if (optional) return false;
      fail(VEGAS_ERR_FORMAT, std::string("CPU backend: missing tensor for ") + what);
    }
    if (t->numel() != numel) {
      fail(VEGAS_ERR_FORMAT, "CPU backend: tensor " + t->name + " has " +
                                 std::to_string(t->numel()) + " elements, expected " +
                                 std::to_string(numel));
    }
    done_ += numel;
    return !counting_;
  }
  template <typename T>
  static void allocate(std::vector<T> &out, int64_t numel, size_t size, const std::string &name) {
    try {
      out.resize(static_cast<size_t>(numel));
    } catch (const std::bad_alloc &) {
      fail(VEGAS_ERR_OUT_OF_MEMORY, "CPU backend: cannot allocate " +
                                        std::to_string(static_cast<uint64_t>(numel) * size) +
                                        " bytes for tensor " + name);
    }
  }
  void report() {
    if (progress_ && total_ > 0 &&
        !progress_(static_cast<float>(static_cast<double>(done_) / static_cast<double>(total_)))) {
      fail(VEGAS_ERR_CANCELLED, "model load cancelled by the progress callback");
    }
  }

  const std::function<bool(float)> &progress_;
  bool counting_;
  int64_t total_ = 0;
  int64_t done_ = 0;
};

void convert_all(const ModelConfig &c, const ModelWeights &w, Converter &cv, CpuWeights &out) {
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size, vocab = c.vocab_size;
  const int64_t q_dim = c.q_dim(), kv_dim = c.kv_dim(), hd = c.head_dim;
  if (static_cast<int64_t>(w.layers.size()) != c.n_layers) {
    fail(VEGAS_ERR_FORMAT, "CPU backend: " + std::to_string(w.layers.size()) +
                               " bound layers, config has " + std::to_string(c.n_layers));
  }
  cv.convert(w.embed, vocab * hidden, "embed_tokens", out.embed);
  out.layers.resize(w.layers.size());
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights &l = w.layers[i];
    CpuLayerWeights &o = out.layers[i];
    const std::string at = "layer " + std::to_string(i) + " ";
    cv.convert(l.attn_norm, hidden, (at + "input_layernorm").c_str(), o.attn_norm);
    cv.convert(l.wq, q_dim * hidden, (at + "q_proj").c_str(), o.wq);
    cv.convert(l.wk, kv_dim * hidden, (at + "k_proj").c_str(), o.wk);
    cv.convert(l.wv, kv_dim * hidden, (at + "v_proj").c_str(), o.wv);
    const bool bias = c.attention_bias;
    cv.convert(l.bq, q_dim, (at + "q_proj.bias").c_str(), o.bq, !bias);
    cv.convert(l.bk, kv_dim, (at + "k_proj.bias").c_str(), o.bk, !bias);
    cv.convert(l.bv, kv_dim, (at + "v_proj.bias").c_str(), o.bv, !bias);
    cv.convert(l.q_norm, hd, (at + "q_norm").c_str(), o.q_norm, !c.qk_norm);
    cv.convert(l.k_norm, hd, (at + "k_norm").c_str(), o.k_norm, !c.qk_norm);
    cv.convert(l.wo, hidden * q_dim, (at + "o_proj").c_str(), o.wo);
    cv.convert(l.mlp_norm, hidden, (at + "post_attention_layernorm").c_str(), o.mlp_norm);
    cv.convert(l.w_gate, inter * hidden, (at + "gate_proj").c_str(), o.w_gate);
    cv.convert(l.w_up, inter * hidden, (at + "up_proj").c_str(), o.w_up);
    cv.convert(l.w_down, hidden * inter, (at + "down_proj").c_str(), o.w_down);
  }
  cv.convert(w.final_norm, hidden, "norm", out.final_norm);
  // A tied head (HF ignores a stored lm_head then) shares the embedding's copy.
  const bool tied = c.tie_word_embeddings || w.lm_head == w.embed;
  if (!tied) cv.convert(w.lm_head, vocab * hidden, "lm_head", out.lm_head);
}

}  // namespace

uint64_t CpuWeights::bytes() const {
  uint64_t n = embed.bytes() + lm_head.bytes() + final_norm.size() * sizeof(float);
  for (const CpuLayerWeights &l : layers) {
    for (const std::vector<float> *v :
         {&l.attn_norm, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm, &l.mlp_norm})
      n += v->size() * sizeof(float);
    for (const CpuMatrix *m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      n += m->bytes();
  }
  return n;
}

CpuWeights convert_weights(const ModelConfig &config, const ModelWeights &weights,
                           const std::function<bool(float)> &progress) {
  CpuWeights out;
  Converter counter(progress, /*counting=*/true);
  {
    CpuWeights unused;
    convert_all(config, weights, counter, unused);
  }
  Converter converter(progress, /*counting=*/false);
  converter.set_total(counter.counted());
  convert_all(config, weights, converter, out);
  return out;
}

}  // namespace vegas
