#include "backend/cuda/cuda_weights.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "common/bf16.h"
#include "cuda_utils.cuh"
#include "gguf/ggml_repack.h"
#include "gguf/ggml_types.h"
#include "gguf/gguf_export.h"
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

// An [n][k] matrix: bf16 at *bf, or kept as `plan`'s row ranges (their
// arrays at q). Returns the bytes a forward pass reads of it.
int64_t take_matrix(Arena &a, int64_t n, int64_t k, const MatrixPlan &plan, bf16_t **bf,
                    QuantRows *q) {
  *q = QuantRows{};
  if (plan.empty()) {
    *bf = a.take<bf16_t>(n * k);
    return 2 * n * k;
  }
  *bf = nullptr;
  int64_t bytes = 0, row0 = 0;
  for (const QuantPart &part : plan) {
    if (q->n_parts == QuantRows::kMaxParts)
      fail(VEGAS_ERR_INTERNAL, "a quantized matrix of more than three row ranges");
    kernels::QuantMatrix &m = q->part[q->n_parts];
    q->row0[q->n_parts++] = static_cast<int32_t>(row0);
    m.format = part.format;
    m.n = static_cast<int32_t>(part.rows);
    m.k = static_cast<int32_t>(k);
    const int64_t qs_bytes = part.rows * kernels::quant_row_bytes(part.format, k);
    const int64_t scales = part.rows * kernels::quant_row_scales(part.format, k);
    const int64_t scales_f32 = part.rows * kernels::quant_row_scales_f32(part.format, k);
    m.qs = a.take<uint8_t>(qs_bytes);
    m.scales = scales > 0 ? a.take<kernels::f16>(scales) : nullptr;
    m.scales_f32 = scales_f32 > 0 ? a.take<float>(scales_f32) : nullptr;
    bytes += qs_bytes + 2 * scales + 4 * scales_f32;
    row0 += part.rows;
  }
  if (row0 != n) fail(VEGAS_ERR_INTERNAL, "a quantized matrix's row ranges do not cover it");
  return bytes;
}

// The format of a tensor's GGUF blocks or FP8 codes as the kernels read
// them, or nullopt.
QuantChoice format_of(const TensorView &t, int64_t k) {
  if (t.fp8 != nullptr && t.fp8_scales != nullptr) {
    if (k % kernels::quant_gemv_k_align(kernels::QuantFormat::kF8) != 0) return std::nullopt;
    return kernels::QuantFormat::kF8;
  }
  if (t.ggml_blocks == nullptr) return std::nullopt;
  QuantChoice f;
  switch (t.ggml_type) {
    case gguf::kGgmlQ8_0:
      f = kernels::QuantFormat::kQ8_0;
      break;
    case gguf::kGgmlQ4_0:
      f = kernels::QuantFormat::kQ4_0;
      break;
    case gguf::kGgmlQ4_K:
      f = kernels::QuantFormat::kQ4_K;
      break;
    case gguf::kGgmlQ5_K:
      f = kernels::QuantFormat::kQ5_K;
      break;
    case gguf::kGgmlQ6_K:
      f = kernels::QuantFormat::kQ6_K;
      break;
    default:
      return std::nullopt;
  }
  if (!gguf::repackable(t.ggml_type, k, kernels::quant_gemv_k_align(*f))) return std::nullopt;
  return f;
}

// The parts of one matrix in order, each part's rows in its own format;
// bf16 (empty) when one part has no format the kernels read.
MatrixPlan plan_parts(std::initializer_list<const TensorView *> parts, int64_t k) {
  MatrixPlan plan;
  for (const TensorView *t : parts) {
    const QuantChoice f = format_of(*t, k);
    if (!f) return {};
    if (!plan.empty() && plan.back().format == *f)
      plan.back().rows += t->shape[0];
    else
      plan.push_back(QuantPart{t->shape[0], *f});
  }
  return plan;
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
    p.qkv = plan_parts({l.wq, l.wk, l.wv}, h);
    p.o = plan_parts({l.wo}, c.q_dim());
    p.gate_up = plan_parts({l.w_gate, l.w_up}, h);
    p.down = plan_parts({l.w_down}, c.intermediate_size);
    plan.layers.push_back(p);
  }
  if (!c.tie_word_embeddings) plan.lm_head = plan_parts({w.lm_head}, h);
  return plan;
}

// Uploads the FP8 codes and group scales of `t` as rows [row0, row0 + t
// rows) of `q`.
void put_fp8(const TensorView &t, const kernels::QuantMatrix &q, int64_t row0) {
  const int64_t n = t.shape[0], k = t.shape[1];
  const std::string what = "upload of tensor " + t.name;
  check(cudaMemcpy(const_cast<uint8_t *>(q.qs) + row0 * k, t.fp8, static_cast<size_t>(n * k),
                   cudaMemcpyHostToDevice),
        what.c_str());
  const int64_t groups = kernels::quant_row_scales_f32(q.format, k);
  check(cudaMemcpy(const_cast<float *>(q.scales_f32) + row0 * groups, t.fp8_scales,
                   static_cast<size_t>(n * groups) * sizeof(float), cudaMemcpyHostToDevice),
        what.c_str());
}

// Uploads the quantized rows of `t` as rows [row0, row0 + t rows) of `q`.
void put_quantized(const TensorView &t, const kernels::QuantMatrix &q, int64_t row0) {
  if (q.format == kernels::QuantFormat::kF8) return put_fp8(t, q, row0);
  const int64_t n = t.shape[0], k = t.shape[1];
  std::vector<uint8_t> qs(static_cast<size_t>(n * kernels::quant_row_bytes(q.format, k)));
  std::vector<uint16_t> scales(static_cast<size_t>(n * kernels::quant_row_scales(q.format, k)));
  gguf::split_ggml_blocks(t.ggml_type, t.ggml_blocks, n, k, qs.data(), scales.data());
  const std::string what = "upload of tensor " + t.name;
  check(cudaMemcpy(const_cast<uint8_t *>(q.qs) + row0 * kernels::quant_row_bytes(q.format, k),
                   qs.data(), qs.size(), cudaMemcpyHostToDevice),
        what.c_str());
  if (!scales.empty())
    check(cudaMemcpy(
              const_cast<kernels::f16 *>(q.scales) + row0 * kernels::quant_row_scales(q.format, k),
              scales.data(), scales.size() * 2, cudaMemcpyHostToDevice),
          what.c_str());
}

// One part of a matrix, in the matrix's form: rows [row0, row0 + t rows).
void put_part(const TensorView &t, bf16_t *bf, const QuantRows &q, int64_t row0) {
  if (q.empty()) {
    put(t, bf + row0 * t.shape[1]);
    return;
  }
  for (int i = q.n_parts - 1; i >= 0; --i)
    if (row0 >= q.row0[i]) {
      put_quantized(t, q.part[i], row0 - q.row0[i]);
      return;
    }
}

}  // namespace

int64_t QuantRows::elements() const {
  int64_t n = 0;
  for (int i = 0; i < n_parts; ++i) n += int64_t{part[i].n} * part[i].k;
  return n;
}

bool QuantRows::rows_view(int64_t first, int64_t n, kernels::QuantMatrix *view) const {
  for (int i = 0; i < n_parts; ++i) {
    const kernels::QuantMatrix &m = part[i];
    const int64_t skip = first - row0[i];
    if (skip < 0 || skip + n > m.n) continue;
    *view = m;
    view->n = static_cast<int32_t>(n);
    view->qs += skip * kernels::quant_row_bytes(m.format, m.k);
    if (m.scales != nullptr) view->scales += skip * kernels::quant_row_scales(m.format, m.k);
    if (m.scales_f32 != nullptr)
      view->scales_f32 += skip * kernels::quant_row_scales_f32(m.format, m.k);
    return true;
  }
  return false;
}

bool WeightPlan::any() const {
  for (const Layer &l : layers)
    if (!l.qkv.empty() || !l.o.empty() || !l.gate_up.empty() || !l.down.empty()) return true;
  return !lm_head.empty();
}

WeightPlan WeightPlan::uniform(const ModelConfig &c, QuantChoice format) {
  const int64_t h = c.hidden_size, qkv = c.q_dim() + 2 * c.kv_dim(), inter = c.intermediate_size;
  auto whole = [&](int64_t rows) { return format ? MatrixPlan{{rows, *format}} : MatrixPlan{}; };
  WeightPlan plan;
  plan.layers.assign(static_cast<size_t>(c.n_layers),
                     Layer{whole(qkv), whole(h), whole(2 * inter), whole(h)});
  if (!c.tie_word_embeddings) plan.lm_head = whole(c.vocab_size);
  return plan;
}

WeightPlan WeightPlan::k_m(const ModelConfig &c, kernels::QuantFormat base) {
  using F = kernels::QuantFormat;
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), inter = c.intermediate_size;
  const int32_t n = c.n_layers;
  WeightPlan plan;
  for (int32_t i = 0; i < n; ++i) {
    const F wide = gguf::use_more_bits(i, n) ? F::kQ6_K : base;
    Layer l;
    l.qkv =
        wide == base ? MatrixPlan{{q + 2 * kv, base}} : MatrixPlan{{q + kv, base}, {kv, F::kQ6_K}};
    l.o = {{h, base}};
    l.gate_up = {{2 * inter, base}};
    l.down = {{h, wide}};
    plan.layers.push_back(l);
  }
  if (!c.tie_word_embeddings) plan.lm_head = {{c.vocab_size, F::kQ6_K}};
  return plan;
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

DeviceWeights DeviceWeights::synthetic(const ModelConfig &c, uint64_t seed,
                                       const WeightPlan &plan) {
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
  // A quantized matrix: uniform random values, scales that give it about the
  // same variance (uniform int8 spans +-128, a Q4_0 value +-8, an F8 code
  // below 2 in magnitude about +-1; a K-format value is its block scale times
  // a random sub-scale times the quant).
  auto fill_quantized = [&](const kernels::QuantMatrix &q, int64_t in) {
    kernels::RandomFillParams r;
    r.out_bytes = const_cast<uint8_t *>(q.qs);
    r.n = int64_t{q.n} * kernels::quant_row_bytes(q.format, q.k);
    r.seed = seed * 0x100000001b3ull + ++stream_id;
    // e4m3 codes below 2 in magnitude: no NaN code (S.1111.111), values of about 1.
    if (q.format == kernels::QuantFormat::kF8) r.byte_mask = 0xbf;
    check(kernels::random_fill(r, nullptr), "random_fill");
    const float bound = std::sqrt(3.0f / static_cast<float>(in));
    if (kernels::quant_is_k(q.format)) {
      const float span = q.format == kernels::QuantFormat::kQ4_K   ? 32.0f * 15
                         : q.format == kernels::QuantFormat::kQ5_K ? 32.0f * 31
                                                                   : 64.0f * 32;
      check(kernels::quant_set_super_block_scales(q, bound / span, bound / span, nullptr),
            "synthetic block scales");
      return;
    }
    // Q8_0 / Q4_0 f16 scales, F8 f32 ones, for values spanning about +-range.
    const bool f8 = q.format == kernels::QuantFormat::kF8;
    kernels::RandomFillParams s;
    if (f8)
      s.out_f32 = const_cast<float *>(q.scales_f32);
    else
      s.out_f16 = const_cast<kernels::f16 *>(q.scales);
    s.n = int64_t{q.n} * (f8 ? kernels::quant_row_scales_f32(q.format, q.k)
                             : kernels::quant_row_scales(q.format, q.k));
    s.seed = seed * 0x100000001b3ull + ++stream_id;
    const float range = f8 ? 1.0f : q.format == kernels::QuantFormat::kQ8_0 ? 128.0f : 8.0f;
    s.offset = bound / range;
    s.scale = 0.1f * s.offset;
    check(kernels::random_fill(s, nullptr), "random_fill");
  };
  auto linear_q = [&](bf16_t *p, const QuantRows &q, int64_t out, int64_t in) {
    for (int i = 0; i < q.n_parts; ++i) fill_quantized(q.part[i], in);
    if (q.empty()) fill(p, out * in, std::sqrt(3.0f / static_cast<float>(in)), 0.0f);
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
