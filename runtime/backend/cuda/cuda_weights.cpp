#include "backend/cuda/cuda_weights.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "common/bf16.h"
#include "cuda_utils.cuh"
#include "gguf/ggml_repack.h"
#include "gguf/ggml_types.h"
#include "model/rope.h"
#include "random_fill.cuh"

namespace vegas::cuda {

namespace {

constexpr size_t kAlign = 256;

size_t aligned(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// Hands out aligned sub-ranges of one allocation; a first pass with a null
// base only counts the bytes.
class Arena {
 public:
  explicit Arena(unsigned char *base) : base_(base) {}
  template <typename T>
  T *take(int64_t n) {
    T *p = base_ ? reinterpret_cast<T *>(base_ + used_) : nullptr;
    used_ += aligned(static_cast<size_t>(n) * sizeof(T));
    return p;
  }
  size_t used() const { return used_; }

 private:
  unsigned char *base_;
  size_t used_ = 0;
};

// Copies one tensor into device memory as bf16 at `dst` (elements).
void put(const TensorView &t, bf16_t *dst) {
  const int64_t n = t.numel();
  std::vector<uint16_t> host;
  const void *src = t.data;
  if (t.dtype != DType::kBF16) {
    std::vector<float> f(static_cast<size_t>(n));
    t.to_f32(f.data());
    host.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      host[static_cast<size_t>(i)] = f32_to_bf16(f[static_cast<size_t>(i)]);
    src = host.data();
  }
  check(cudaMemcpy(dst, src, static_cast<size_t>(n) * 2, cudaMemcpyHostToDevice),
        ("upload of tensor " + t.name).c_str());
}

// An [n][k] matrix: bf16 at *bf, or kept in `format` (its arrays at *q).
// Returns the bytes a forward pass reads of it.
int64_t take_matrix(Arena &a, int64_t n, int64_t k, const QuantChoice &format, bf16_t **bf,
                    kernels::QuantMatrix *q) {
  if (!format) {
    *bf = a.take<bf16_t>(n * k);
    return 2 * n * k;
  }
  *bf = nullptr;
  q->format = *format;
  q->n = static_cast<int32_t>(n);
  q->k = static_cast<int32_t>(k);
  const int64_t qs_bytes = n * kernels::quant_row_bytes(*format, k);
  q->qs = a.take<uint8_t>(qs_bytes);
  q->scales = a.take<kernels::f16>(n * k / kernels::kQuantBlock);
  return qs_bytes + 2 * n * k / kernels::kQuantBlock;
}

// The format every part of a matrix shares as GGUF blocks the kernels read,
// or nullopt (bf16) when one part lacks them or they differ.
QuantChoice shared_format(std::initializer_list<const TensorView *> parts, int64_t k) {
  const TensorView &first = **parts.begin();
  if (first.ggml_blocks == nullptr) return std::nullopt;
  const kernels::QuantFormat format = first.ggml_type == gguf::kGgmlQ8_0
                                          ? kernels::QuantFormat::kQ8_0
                                          : kernels::QuantFormat::kQ4_0;
  if (!gguf::repackable(first.ggml_type, k, kernels::quant_gemv_k_align(format)))
    return std::nullopt;
  for (const TensorView *p : parts)
    if (p->ggml_blocks == nullptr || p->ggml_type != first.ggml_type) return std::nullopt;
  return format;
}

WeightPlan plan_of(const ModelConfig &c, const ModelWeights &w) {
  const int64_t h = c.hidden_size;
  WeightPlan plan;
  static const char *env = std::getenv("VEGAS_CUDA_QUANT_WEIGHTS");
  const std::string mode = env != nullptr ? env : "";
  const bool keep = mode == "1" || (mode != "0" && h > kSmallModelHidden);
  if (!keep) {
    plan.layers.assign(static_cast<size_t>(c.n_layers), WeightPlan::Layer{});
    return plan;
  }
  for (const LayerWeights &l : w.layers) {
    WeightPlan::Layer p;
    p.qkv = shared_format({l.wq, l.wk, l.wv}, h);
    p.o = shared_format({l.wo}, c.q_dim());
    p.gate_up = shared_format({l.w_gate, l.w_up}, h);
    p.down = shared_format({l.w_down}, c.intermediate_size);
    plan.layers.push_back(p);
  }
  if (!c.tie_word_embeddings) plan.lm_head = shared_format({w.lm_head}, h);
  return plan;
}

// Uploads the Q8_0 / Q4_0 rows of `t` as rows [row0, row0 + t rows) of `q`.
void put_quantized(const TensorView &t, const kernels::QuantMatrix &q, int64_t row0) {
  const int64_t n = t.shape[0], k = t.shape[1];
  std::vector<uint8_t> qs(static_cast<size_t>(n * kernels::quant_row_bytes(q.format, k)));
  std::vector<uint16_t> scales(static_cast<size_t>(n * k / kernels::kQuantBlock));
  gguf::split_ggml_blocks(t.ggml_type, t.ggml_blocks, n, k, qs.data(), scales.data());
  const std::string what = "upload of tensor " + t.name;
  check(cudaMemcpy(const_cast<uint8_t *>(q.qs) + row0 * kernels::quant_row_bytes(q.format, k),
                   qs.data(), qs.size(), cudaMemcpyHostToDevice),
        what.c_str());
  check(cudaMemcpy(const_cast<kernels::f16 *>(q.scales) + row0 * (k / kernels::kQuantBlock),
                   scales.data(), scales.size() * 2, cudaMemcpyHostToDevice),
        what.c_str());
}

// One part of a matrix, in the matrix's form.
void put_part(const TensorView &t, bf16_t *bf, const kernels::QuantMatrix &q, int64_t row0) {
  if (q.qs != nullptr)
    put_quantized(t, q, row0);
  else
    put(t, bf + row0 * t.shape[1]);
}

}  // namespace

bool WeightPlan::any() const {
  for (const Layer &l : layers)
    if (l.qkv || l.o || l.gate_up || l.down) return true;
  return lm_head.has_value();
}

void DeviceWeights::allocate(const ModelConfig &c, const WeightPlan &plan) {
  const int64_t h = c.hidden_size, qkv = c.q_dim() + 2 * c.kv_dim(), inter = c.intermediate_size;
  int64_t matrix_bytes = 0;
  auto lay_out = [&](Arena &a) {
    matrix_bytes = 0;
    embed = a.take<bf16_t>(int64_t{c.vocab_size} * h);
    final_norm = a.take<bf16_t>(h);
    if (c.tie_word_embeddings)
      lm_head = embed;
    else
      matrix_bytes += take_matrix(a, c.vocab_size, h, plan.lm_head, &lm_head, &q_lm_head);
    rope_inv_freq = a.take<float>(c.rotary_dim() / 2 > 0 ? c.rotary_dim() / 2 : 1);
    layers.assign(static_cast<size_t>(c.n_layers), DeviceLayer{});
    for (size_t i = 0; i < layers.size(); ++i) {
      DeviceLayer &l = layers[i];
      const WeightPlan::Layer &p = plan.layers[i];
      l.attn_norm = a.take<bf16_t>(h);
      matrix_bytes += take_matrix(a, qkv, h, p.qkv, &l.wqkv, &l.q_wqkv);
      l.bqkv = c.attention_bias ? a.take<bf16_t>(qkv) : nullptr;
      l.q_norm = c.qk_norm ? a.take<bf16_t>(c.head_dim) : nullptr;
      l.k_norm = c.qk_norm ? a.take<bf16_t>(c.head_dim) : nullptr;
      matrix_bytes += take_matrix(a, h, c.q_dim(), p.o, &l.wo, &l.q_wo);
      l.mlp_norm = a.take<bf16_t>(h);
      matrix_bytes += take_matrix(a, 2 * inter, h, p.gate_up, &l.w_gate_up, &l.q_gate_up);
      matrix_bytes += take_matrix(a, h, inter, p.down, &l.w_down, &l.q_down);
    }
  };
  Arena count(nullptr);
  lay_out(count);
  storage_.allocate(count.used(), "the model weights");
  Arena real(storage_.get<unsigned char>());
  lay_out(real);
  quantized = plan.any();
  // Bytes one forward pass reads: every matrix and vector once (tied once).
  const int64_t vectors =
      c.n_layers * (2 * h + (c.attention_bias ? qkv : 0) + (c.qk_norm ? 2 * c.head_dim : 0)) + h;
  bytes = static_cast<uint64_t>(2 * vectors + matrix_bytes +
                                2 * int64_t{c.vocab_size} * h);  // + the embedding (or tied head)
  const std::vector<float> inv_freq = vegas::rope_inv_freq(c);
  if (!inv_freq.empty())
    check(cudaMemcpy(rope_inv_freq, inv_freq.data(), inv_freq.size() * sizeof(float),
                     cudaMemcpyHostToDevice),
          "upload of the RoPE table");
}

DeviceWeights DeviceWeights::upload(const ModelConfig &c, const ModelWeights &w) {
  DeviceWeights d;
  d.allocate(c, plan_of(c, w));
  const int64_t q = c.q_dim(), kv = c.kv_dim(), inter = c.intermediate_size;
  put(*w.embed, d.embed);
  put(*w.final_norm, d.final_norm);
  if (!c.tie_word_embeddings) put_part(*w.lm_head, d.lm_head, d.q_lm_head, 0);
  for (size_t i = 0; i < d.layers.size(); ++i) {
    const LayerWeights &src = w.layers[i];
    DeviceLayer &dst = d.layers[i];
    put(*src.attn_norm, dst.attn_norm);
    put_part(*src.wq, dst.wqkv, dst.q_wqkv, 0);
    put_part(*src.wk, dst.wqkv, dst.q_wqkv, q);
    put_part(*src.wv, dst.wqkv, dst.q_wqkv, q + kv);
    if (dst.bqkv) {
      put(*src.bq, dst.bqkv);
      put(*src.bk, dst.bqkv + q);
      put(*src.bv, dst.bqkv + q + kv);
    }
    if (dst.q_norm) {
      put(*src.q_norm, dst.q_norm);
      put(*src.k_norm, dst.k_norm);
    }
    put_part(*src.wo, dst.wo, dst.q_wo, 0);
    put(*src.mlp_norm, dst.mlp_norm);
    put_part(*src.w_gate, dst.w_gate_up, dst.q_gate_up, 0);
    put_part(*src.w_up, dst.w_gate_up, dst.q_gate_up, inter);
    put_part(*src.w_down, dst.w_down, dst.q_down, 0);
  }
  return d;
}

DeviceWeights DeviceWeights::synthetic(const ModelConfig &c, uint64_t seed, QuantChoice format) {
  WeightPlan plan;
  plan.layers.assign(static_cast<size_t>(c.n_layers),
                     WeightPlan::Layer{format, format, format, format});
  if (!c.tie_word_embeddings) plan.lm_head = format;
  DeviceWeights d;
  d.allocate(c, plan);
  const int64_t h = c.hidden_size, qkv = c.q_dim() + 2 * c.kv_dim(), inter = c.intermediate_size;
  uint64_t stream_id = 0;
  // Uniform in [offset - scale, offset + scale); a linear layer gets the
  // variance 1/in of the usual initialisations, norms sit near 1.
  auto fill = [&](bf16_t *p, int64_t n, float scale, float offset) {
    kernels::RandomFillParams r;
    r.out = reinterpret_cast<kernels::bf16 *>(p);
    r.n = n;
    r.seed = seed * 0x100000001b3ull + ++stream_id;
    r.scale = scale;
    r.offset = offset;
    check(kernels::random_fill(r, nullptr), "random_fill");
  };
  // A quantized matrix: uniform random values, scales that give it the same
  // variance (uniform int8 spans +-128, a Q4_0 value +-8).
  auto fill_quantized = [&](const kernels::QuantMatrix &q, int64_t in) {
    kernels::RandomFillParams r;
    r.out_bytes = const_cast<uint8_t *>(q.qs);
    r.n = int64_t{q.n} * kernels::quant_row_bytes(q.format, q.k);
    r.seed = seed * 0x100000001b3ull + ++stream_id;
    check(kernels::random_fill(r, nullptr), "random_fill");
    kernels::RandomFillParams s;
    s.out_f16 = const_cast<kernels::f16 *>(q.scales);
    s.n = int64_t{q.n} * q.k / kernels::kQuantBlock;
    s.seed = seed * 0x100000001b3ull + ++stream_id;
    const float range = q.format == kernels::QuantFormat::kQ8_0 ? 128.0f : 8.0f;
    s.offset = std::sqrt(3.0f / static_cast<float>(in)) / range;
    s.scale = 0.1f * s.offset;
    check(kernels::random_fill(s, nullptr), "random_fill");
  };
  auto linear_q = [&](bf16_t *p, const kernels::QuantMatrix &q, int64_t out, int64_t in) {
    if (q.qs != nullptr)
      fill_quantized(q, in);
    else
      fill(p, out * in, std::sqrt(3.0f / static_cast<float>(in)), 0.0f);
  };
  fill(d.embed, int64_t{c.vocab_size} * h, 1.0f, 0.0f);
  fill(d.final_norm, h, 0.1f, 1.0f);
  if (!c.tie_word_embeddings) linear_q(d.lm_head, d.q_lm_head, c.vocab_size, h);
  for (DeviceLayer &l : d.layers) {
    fill(l.attn_norm, h, 0.1f, 1.0f);
    linear_q(l.wqkv, l.q_wqkv, qkv, h);
    if (l.bqkv) fill(l.bqkv, qkv, 0.02f, 0.0f);
    if (l.q_norm) {
      fill(l.q_norm, c.head_dim, 0.1f, 1.0f);
      fill(l.k_norm, c.head_dim, 0.1f, 1.0f);
    }
    linear_q(l.wo, l.q_wo, h, c.q_dim());
    fill(l.mlp_norm, h, 0.1f, 1.0f);
    linear_q(l.w_gate_up, l.q_gate_up, 2 * inter, h);
    linear_q(l.w_down, l.q_down, h, inter);
  }
  check(cudaDeviceSynchronize(), "synthetic weight fill");
  return d;
}

}  // namespace vegas::cuda
