#include "backend/cuda/cuda_weights.h"

#include <cmath>
#include <string>

#include "common/bf16.h"
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

}  // namespace

void DeviceWeights::allocate(const ModelConfig &c) {
  const int64_t h = c.hidden_size, qkv = c.q_dim() + 2 * c.kv_dim(), inter = c.intermediate_size;
  auto lay_out = [&](Arena &a) {
    embed = a.take<bf16_t>(int64_t{c.vocab_size} * h);
    final_norm = a.take<bf16_t>(h);
    lm_head = c.tie_word_embeddings ? embed : a.take<bf16_t>(int64_t{c.vocab_size} * h);
    rope_inv_freq = a.take<float>(c.rotary_dim() / 2 > 0 ? c.rotary_dim() / 2 : 1);
    layers.assign(static_cast<size_t>(c.n_layers), DeviceLayer{});
    for (DeviceLayer &l : layers) {
      l.attn_norm = a.take<bf16_t>(h);
      l.wqkv = a.take<bf16_t>(qkv * h);
      l.bqkv = c.attention_bias ? a.take<bf16_t>(qkv) : nullptr;
      l.q_norm = c.qk_norm ? a.take<bf16_t>(c.head_dim) : nullptr;
      l.k_norm = c.qk_norm ? a.take<bf16_t>(c.head_dim) : nullptr;
      l.wo = a.take<bf16_t>(h * c.q_dim());
      l.mlp_norm = a.take<bf16_t>(h);
      l.w_gate_up = a.take<bf16_t>(2 * inter * h);
      l.w_down = a.take<bf16_t>(h * inter);
    }
  };
  Arena count(nullptr);
  lay_out(count);
  storage_.allocate(count.used(), "the model weights");
  Arena real(storage_.get<unsigned char>());
  lay_out(real);
  // Bytes one forward pass reads: every matrix and vector once (tied once).
  const int64_t per_layer = 2 * h + qkv * h + (c.attention_bias ? qkv : 0) +
                            (c.qk_norm ? 2 * c.head_dim : 0) + h * c.q_dim() + 3 * inter * h;
  bytes = 2 * static_cast<uint64_t>(int64_t{c.n_layers} * per_layer + h +
                                    int64_t{c.vocab_size} * h * (c.tie_word_embeddings ? 1 : 2));
  const std::vector<float> inv_freq = vegas::rope_inv_freq(c);
  if (!inv_freq.empty())
    check(cudaMemcpy(rope_inv_freq, inv_freq.data(), inv_freq.size() * sizeof(float),
                     cudaMemcpyHostToDevice),
          "upload of the RoPE table");
}

DeviceWeights DeviceWeights::upload(const ModelConfig &c, const ModelWeights &w) {
  DeviceWeights d;
  d.allocate(c);
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), inter = c.intermediate_size;
  put(*w.embed, d.embed);
  put(*w.final_norm, d.final_norm);
  if (!c.tie_word_embeddings) put(*w.lm_head, d.lm_head);
  for (size_t i = 0; i < d.layers.size(); ++i) {
    const LayerWeights &src = w.layers[i];
    DeviceLayer &dst = d.layers[i];
    put(*src.attn_norm, dst.attn_norm);
    put(*src.wq, dst.wqkv);
    put(*src.wk, dst.wqkv + q * h);
    put(*src.wv, dst.wqkv + (q + kv) * h);
    if (dst.bqkv) {
      put(*src.bq, dst.bqkv);
      put(*src.bk, dst.bqkv + q);
      put(*src.bv, dst.bqkv + q + kv);
    }
    if (dst.q_norm) {
      put(*src.q_norm, dst.q_norm);
      put(*src.k_norm, dst.k_norm);
    }
    put(*src.wo, dst.wo);
    put(*src.mlp_norm, dst.mlp_norm);
    put(*src.w_gate, dst.w_gate_up);
    put(*src.w_up, dst.w_gate_up + inter * h);
    put(*src.w_down, dst.w_down);
  }
  return d;
}

DeviceWeights DeviceWeights::synthetic(const ModelConfig &c, uint64_t seed) {
  DeviceWeights d;
  d.allocate(c);
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
  auto linear = [&](bf16_t *p, int64_t out, int64_t in) {
    fill(p, out * in, std::sqrt(3.0f / static_cast<float>(in)), 0.0f);
  };
  fill(d.embed, int64_t{c.vocab_size} * h, 1.0f, 0.0f);
  fill(d.final_norm, h, 0.1f, 1.0f);
  if (!c.tie_word_embeddings) linear(d.lm_head, c.vocab_size, h);
  for (DeviceLayer &l : d.layers) {
    fill(l.attn_norm, h, 0.1f, 1.0f);
    linear(l.wqkv, qkv, h);
    if (l.bqkv) fill(l.bqkv, qkv, 0.02f, 0.0f);
    if (l.q_norm) {
      fill(l.q_norm, c.head_dim, 0.1f, 1.0f);
      fill(l.k_norm, c.head_dim, 0.1f, 1.0f);
    }
    linear(l.wo, h, c.q_dim());
    fill(l.mlp_norm, h, 0.1f, 1.0f);
    linear(l.w_gate_up, 2 * inter, h);
    linear(l.w_down, h, inter);
  }
  check(cudaDeviceSynchronize(), "synthetic weight fill");
  return d;
}

}  // namespace vegas::cuda
