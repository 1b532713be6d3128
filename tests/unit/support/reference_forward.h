// A naive reference forward pass (double precision, contiguous K/V, plain
// loops, no paging) written independently of the backends, for checking them.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/tensor.h"

namespace vegas::test {

// Which key positions query position `q` sees in `layer`; default: causal.
using Visibility = std::function<bool(int layer, int64_t q, int64_t k)>;

struct ReferenceOutput {
  std::vector<std::vector<double>> logits;   // [position][vocab]
  std::vector<std::vector<double>> k_cache;  // [layer][position * kv_dim + d], after norm + RoPE
  std::vector<std::vector<double>> v_cache;  // [layer][position * kv_dim + d]
  // [layer][position][head][key]: scale * q.k for every key <= position (causal).
  std::vector<std::vector<std::vector<std::vector<double>>>> scaled_qk;
  std::vector<std::vector<std::vector<double>>> lse;  // [layer][position][head] over visible keys
};

inline std::vector<double> ref_tensor(const TensorView *t) {
  std::vector<double> out(t->numel());
  for (int64_t i = 0; i < t->numel(); ++i) out[i] = t->at(i);
  return out;
}

inline void ref_rmsnorm(double *x, int64_t n, const std::vector<double> &w, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * inv * w[i];
}

// y = W x (+ b), W: [out][in].
inline std::vector<double> ref_linear(const std::vector<double> &w, const TensorView *bias,
                                      const std::vector<double> &x, int64_t out) {
  const int64_t in = static_cast<int64_t>(x.size());
  std::vector<double> y(out);
  for (int64_t o = 0; o < out; ++o) {
    double s = bias != nullptr ? bias->at(o) : 0.0;
    for (int64_t i = 0; i < in; ++i) s += w[o * in + i] * x[i];
    y[o] = s;
  }
  return y;
}

// HF rotate_half RoPE with the default rope type: pair (i, i + rot/2), angle
// pos / theta^(2i/rot); dims past rot stay.
inline void ref_rope(double *head, int64_t rot, int64_t pos, double theta) {
  const int64_t half = rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq =
        1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(rot));
    const double a = static_cast<double>(pos) * inv_freq;
    const double x1 = head[i], x2 = head[i + half];
    head[i] = x1 * std::cos(a) - x2 * std::sin(a);
    head[i + half] = x2 * std::cos(a) + x1 * std::sin(a);
  }
}

inline ReferenceOutput reference_forward(const ModelConfig &c, const ModelWeights &w,
                                         const std::vector<int32_t> &tokens,
                                         const Visibility &visible = nullptr) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t H = c.hidden_size, D = c.head_dim, NH = c.n_heads, NKV = c.n_kv_heads;
  const int64_t QD = c.q_dim(), KVD = c.kv_dim(), I = c.intermediate_size;
  const int64_t rot = static_cast<int64_t>(static_cast<double>(D) * c.rope.partial_rotary_factor);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  ReferenceOutput out;
  std::vector<std::vector<double>> x(T);
  for (int64_t t = 0; t < T; ++t) {
    x[t].resize(H);
    for (int64_t i = 0; i < H; ++i) x[t][i] = w.embed->at(tokens[t] * H + i);
  }
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights &lw = w.layers[l];
    const auto wq = ref_tensor(lw.wq), wk = ref_tensor(lw.wk), wv = ref_tensor(lw.wv),
               wo = ref_tensor(lw.wo), wg = ref_tensor(lw.w_gate), wu = ref_tensor(lw.w_up),
               wd = ref_tensor(lw.w_down), an = ref_tensor(lw.attn_norm),
               mn = ref_tensor(lw.mlp_norm);
    std::vector<std::vector<double>> qs(T);
    std::vector<double> kc(T * KVD), vc(T * KVD);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> xn = x[t];
      ref_rmsnorm(xn.data(), H, an, c.rms_norm_eps);
      std::vector<double> q = ref_linear(wq, lw.bq, xn, QD);
      std::vector<double> k = ref_linear(wk, lw.bk, xn, KVD);
      std::vector<double> v = ref_linear(wv, lw.bv, xn, KVD);
      if (c.qk_norm) {
        const auto qn = ref_tensor(lw.q_norm), kn = ref_tensor(lw.k_norm);
        for (int64_t h = 0; h < NH; ++h) ref_rmsnorm(q.data() + h * D, D, qn, c.rms_norm_eps);
        for (int64_t h = 0; h < NKV; ++h) ref_rmsnorm(k.data() + h * D, D, kn, c.rms_norm_eps);
      }
      for (int64_t h = 0; h < NH; ++h) ref_rope(q.data() + h * D, rot, t, c.rope.theta);
      for (int64_t h = 0; h < NKV; ++h) ref_rope(k.data() + h * D, rot, t, c.rope.theta);
      qs[t] = q;
      for (int64_t i = 0; i < KVD; ++i) {
        kc[t * KVD + i] = k[i];
        vc[t * KVD + i] = v[i];
      }
    }
    out.scaled_qk.emplace_back(T);
    out.lse.emplace_back(T);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> attn(QD, 0.0);
      out.scaled_qk.back()[t].resize(NH);
      out.lse.back()[t].resize(NH);
      for (int64_t h = 0; h < NH; ++h) {
        const int64_t kvh = h / (NH / NKV);
        std::vector<double> s(t + 1);
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += qs[t][h * D + d] * kc[j * KVD + kvh * D + d];
          s[j] = dot * scale;
        }
        out.scaled_qk.back()[t][h] = s;
        double mx = -1e300;
        for (int64_t j = 0; j <= t; ++j)
          if (!visible || visible(l, t, j)) mx = std::max(mx, s[j]);
        double sum = 0;
        std::vector<double> p(t + 1, 0.0);
        for (int64_t j = 0; j <= t; ++j) {
          if (visible && !visible(l, t, j)) continue;
          p[j] = std::exp(s[j] - mx);
          sum += p[j];
        }
        out.lse.back()[t][h] = mx + std::log(sum);
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t d = 0; d < D; ++d) attn[h * D + d] += p[j] / sum * vc[j * KVD + kvh * D + d];
      }
      const std::vector<double> o = ref_linear(wo, nullptr, attn, H);
      for (int64_t i = 0; i < H; ++i) x[t][i] += o[i];
      std::vector<double> xn = x[t];
      ref_rmsnorm(xn.data(), H, mn, c.rms_norm_eps);
      std::vector<double> g = ref_linear(wg, nullptr, xn, I);
      const std::vector<double> u = ref_linear(wu, nullptr, xn, I);
      for (int64_t i = 0; i < I; ++i) {
        const double gi = g[i];
        g[i] = gi / (1.0 + std::exp(-gi)) * u[i];
      }
      const std::vector<double> dn = ref_linear(wd, nullptr, g, H);
      for (int64_t i = 0; i < H; ++i) x[t][i] += dn[i];
    }
    out.k_cache.push_back(kc);
    out.v_cache.push_back(vc);
  }
  const auto fnorm = ref_tensor(w.final_norm);
  const TensorView *head = c.tie_word_embeddings ? w.embed : w.lm_head;
  const auto wh = ref_tensor(head);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> xn = x[t];
    ref_rmsnorm(xn.data(), H, fnorm, c.rms_norm_eps);
    out.logits.push_back(ref_linear(wh, nullptr, xn, c.vocab_size));
  }
  return out;
}

}  // namespace vegas::test
