// The small kernels vs float64 host references. Outputs poisoned with NaN
// beforehand, so an unwritten element fails. bf16 outputs are compared at
// relative L2 5e-3 (rounding to bf16 is at most 2^-9 relative per element;
// everything else is f32).
#include <algorithm>

#include "argmax.cuh"
#include "embedding.cuh"
#include "gpu_test_util.h"
#include "rmsnorm.cuh"
#include "rope_kv.cuh"
#include "swiglu.cuh"

namespace vegas::test {
namespace {

class Kernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
  std::mt19937 rng{42};
};

// Gathers rows of the table by id, exactly (bf16 -> f32 is exact).
TEST_F(Kernels, EmbeddingGather) {
  const int vocab = 50, hidden = 96;
  const auto table = random_bf16(size_t(vocab) * hidden, rng);
  const std::vector<int32_t> ids = {3, 0, 49, 3, 17};
  Dev<uint16_t> dt(table);
  Dev<int32_t> di(ids);
  Dev<float> out(ids.size() * hidden);
  kernels::EmbeddingParams p{di.get(), dt.as<kernels::bf16>(), out.get(), 5, hidden, vocab};
  CUDA_OK(kernels::embedding_gather(p, nullptr));
  const auto got = out.download();
  for (size_t r = 0; r < ids.size(); ++r)
    for (int i = 0; i < hidden; ++i)
      ASSERT_EQ(got[r * hidden + i], bf16_to_f32(table[size_t(ids[r]) * hidden + i]));
}

// RMSNorm with a row gather (the final norm of logit rows) and without.
TEST_F(Kernels, RmsNormWithAndWithoutGather) {
  for (int hidden : {64, 512, 4096}) {
    const int rows = 7;
    std::vector<float> x(size_t(rows) * hidden);
    std::normal_distribution<float> n(0.f, 3.f);
    for (auto &v : x) v = n(rng);
    const auto w = random_bf16(hidden, rng, 0.5f, 1.0f);
    const std::vector<int32_t> gather = {6, 0, 3};
    for (bool use_gather : {false, true}) {
      const int out_rows = use_gather ? 3 : rows;
      Dev<float> dx(x);
      Dev<uint16_t> dw(w), out(size_t(out_rows) * hidden);
      Dev<int32_t> dg(gather);
      kernels::RmsNormParams p;
      p.x = dx.get();
      p.row_index = use_gather ? dg.get() : nullptr;
      p.weight = dw.as<kernels::bf16>();
      p.out = out.as<kernels::bf16>();
      p.rows = out_rows;
      p.hidden = hidden;
      p.eps = 1e-6f;
      CUDA_OK(kernels::rmsnorm(p, nullptr));
      std::vector<double> ref(size_t(out_rows) * hidden);
      for (int r = 0; r < out_rows; ++r) {
        const int src = use_gather ? gather[r] : r;
        double ss = 0;
        for (int i = 0; i < hidden; ++i)
          ss += double(x[size_t(src) * hidden + i]) * x[size_t(src) * hidden + i];
        const double inv = 1.0 / std::sqrt(ss / hidden + 1e-6);
        for (int i = 0; i < hidden; ++i)
          ref[size_t(r) * hidden + i] = x[size_t(src) * hidden + i] * inv * bf16_to_f32(w[i]);
      }
      EXPECT_LT(rel_l2(bf16_vec_to_float(out.download()), ref), 5e-3) << hidden;
    }
  }
}

TEST_F(Kernels, Swiglu) {
  const int rows = 5, inter = 1000;
  const auto gu = random_bf16(size_t(rows) * 2 * inter, rng, 4.0f);
  Dev<uint16_t> dgu(gu), out(size_t(rows) * inter);
  kernels::SwigluParams p{dgu.as<kernels::bf16>(), out.as<kernels::bf16>(), rows, inter};
  CUDA_OK(kernels::swiglu(p, nullptr));
  std::vector<double> ref(size_t(rows) * inter);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < inter; ++i) {
      const double g = bf16_to_f32(gu[size_t(r) * 2 * inter + i]);
      const double u = bf16_to_f32(gu[size_t(r) * 2 * inter + inter + i]);
      ref[size_t(r) * inter + i] = g / (1 + std::exp(-g)) * u;
    }
  EXPECT_LT(rel_l2(bf16_vec_to_float(out.download()), ref), 5e-3);
}

// Argmax: the lowest index among equal maxima, like the host argmax().
TEST_F(Kernels, ArgmaxLowestIndexOfTies) {
  const int rows = 4, vocab = 151936;
  std::vector<float> logits(size_t(rows) * vocab);
  std::uniform_real_distribution<float> u(-10.f, 10.f);
  for (auto &v : logits) v = u(rng);
  logits[size_t(0) * vocab + 77777] = 50.f;
  logits[size_t(1) * vocab + 90000] = 50.f;  // tie: 1234 must win
  logits[size_t(1) * vocab + 1234] = 50.f;
  logits[size_t(2) * vocab + vocab - 1] = 50.f;
  logits[size_t(3) * vocab + 0] = 50.f;
  Dev<float> dl(logits);
  Dev<int32_t> out(rows);
  kernels::ArgmaxParams p{dl.get(), out.get(), rows, vocab};
  CUDA_OK(kernels::argmax(p, nullptr));
  EXPECT_EQ(out.download(), (std::vector<int32_t>{77777, 1234, vocab - 1, 0}));
}

// q/k norm + RoPE + cache write, with biases and partial rotary; a row with
// slot -1 writes no cache entry.
TEST_F(Kernels, RopeKvNormsBiasPartialRotary) {
  struct Shape {
    int heads, kv_heads, hd, rot;
    bool norm, bias;
  };
  for (const Shape &s : {Shape{8, 2, 64, 64, true, false}, Shape{4, 2, 128, 64, false, true},
                         Shape{32, 8, 128, 128, true, true}}) {
    const int rows = 5, width = (s.heads + 2 * s.kv_heads) * s.hd, n_slots = 20;
    const std::vector<int32_t> pos = {0, 1, 17, 4095, 30000}, slots = {3, 19, -1, 0, 7};
    const auto qkv = random_bf16(size_t(rows) * width, rng, 2.0f);
    const auto bias = random_bf16(width, rng, 0.5f);
    const auto qn = random_bf16(s.hd, rng, 0.5f, 1.0f), kn = random_bf16(s.hd, rng, 0.5f, 1.0f);
    std::vector<float> inv(s.rot / 2);
    for (int i = 0; i < s.rot / 2; ++i) inv[i] = float(std::pow(1e6, -2.0 * i / s.rot));
    const float scaling = 1.25f;
    Dev<uint16_t> dqkv(qkv), db(bias), dqn(qn), dkn(kn), qout(size_t(rows) * s.heads * s.hd);
    Dev<uint16_t> kc(size_t(n_slots) * s.kv_heads * s.hd, 0x11),
        vc(size_t(n_slots) * s.kv_heads * s.hd, 0x11);
    Dev<int32_t> dpos(pos), dslots(slots);
    Dev<float> dinv(inv);
    kernels::RopeKvParams p;
    p.qkv = dqkv.as<kernels::bf16>();
    p.bias = s.bias ? db.as<kernels::bf16>() : nullptr;
    p.q_norm = s.norm ? dqn.as<kernels::bf16>() : nullptr;
    p.k_norm = s.norm ? dkn.as<kernels::bf16>() : nullptr;
    p.norm_eps = 1e-6f;
    p.positions = dpos.get();
    p.slots = dslots.get();
    p.inv_freq = dinv.get();
    p.rot_dim = s.rot;
    p.attention_scaling = scaling;
    p.q_out = qout.as<kernels::bf16>();
    p.k_cache = kc.as<kernels::bf16>();
    p.v_cache = vc.as<kernels::bf16>();
    p.rows = rows;
    p.n_heads = s.heads;
    p.n_kv_heads = s.kv_heads;
    p.head_dim = s.hd;
    CUDA_OK(kernels::rope_kv(p, nullptr));
    const auto qg = bf16_vec_to_float(qout.download());
    const auto kg = kc.download(), vg = vc.download();
    // Reference per head.
    auto head = [&](int r, int h, bool is_k) {
      std::vector<double> x(s.hd), y(s.hd);
      for (int i = 0; i < s.hd; ++i) {
        const size_t col = size_t(h) * s.hd + i;
        x[i] = bf16_to_f32(qkv[size_t(r) * width + col]) + (s.bias ? bf16_to_f32(bias[col]) : 0.0);
      }
      if (s.norm) {
        double ss = 0;
        for (double v : x) ss += v * v;
        const double inv_rms = 1 / std::sqrt(ss / s.hd + 1e-6);
        for (int i = 0; i < s.hd; ++i) x[i] *= inv_rms * bf16_to_f32((is_k ? kn : qn)[i]);
      }
      const int half = s.rot / 2;
      for (int i = 0; i < s.hd; ++i) {
        if (i >= s.rot) {
          y[i] = x[i];
          continue;
        }
        const double a = double(float(pos[r]) * inv[i % half]);
        const double c = std::cos(a) * scaling, sn = std::sin(a) * scaling;
        y[i] = i < half ? x[i] * c - x[i + half] * sn : x[i] * c + x[i - half] * sn;
      }
      return y;
    };
    std::vector<double> qref;
    for (int r = 0; r < rows; ++r)
      for (int h = 0; h < s.heads; ++h) {
        const auto y = head(r, h, false);
        qref.insert(qref.end(), y.begin(), y.end());
      }
    EXPECT_LT(rel_l2(qg, qref), 5e-3);
    std::vector<double> kref, vref;
    std::vector<float> kgot, vgot;
    for (int r = 0; r < rows; ++r) {
      if (slots[r] < 0) continue;
      for (int h = 0; h < s.kv_heads; ++h) {
        const auto y = head(r, s.heads + h, true);
        kref.insert(kref.end(), y.begin(), y.end());
        for (int i = 0; i < s.hd; ++i) {
          const size_t col = size_t(s.heads + s.kv_heads + h) * s.hd + i;
          vref.push_back(bf16_to_f32(qkv[size_t(r) * width + col]) +
                         (s.bias ? bf16_to_f32(bias[col]) : 0.0));
          const size_t at = (size_t(slots[r]) * s.kv_heads + h) * s.hd + i;
          kgot.push_back(bf16_to_f32(kg[at]));
          vgot.push_back(bf16_to_f32(vg[at]));
        }
      }
    }
    EXPECT_LT(rel_l2(kgot, kref), 5e-3);
    EXPECT_LT(rel_l2(vgot, vref), 5e-3);
    // Slots no row names keep their poison (0x1111).
    for (int slot : {1, 2, 4, 5, 6}) EXPECT_EQ(kg[size_t(slot) * s.kv_heads * s.hd], 0x1111);
  }
}

}  // namespace
}  // namespace vegas::test
