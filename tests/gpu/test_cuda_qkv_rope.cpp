// kernels/qkv_rope_mma (label `gpu`): the qkv projection with rope_kv's stage
// fused in, against the two kernels it replaces (small_gemm storing bf16 qkv,
// then rope_kv) run on the same inputs. What it proves: every head of every
// row lands in q_out or its cache slot with the same values (norm, bias,
// partial rotary, YaRN-style scaling), padding rows (slot -1) write no cache
// entry, and nothing else is written (outputs start as NaN poison or as a
// marker). The two paths add the K products in different orders, so a GEMM
// output may round to the neighbouring bf16 (2^-8 relative) before the norm;
// a relative L2 error of 5e-3 allows that and catches any indexing mistake
// (which gives errors of order 1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "qkv_rope.cuh"
#include "rope_kv.cuh"
#include "small_gemm.cuh"

namespace vegas {
namespace {

using test::Dev;

struct Shape {
  int rows, k, heads, kv_heads, hd, rot;
  bool norm_input;  // f32 rows with the RMSNorm prologue (else bf16 rows)
  bool qk_norm, bias;
};

TEST(QkvRope, MatchesSmallGemmThenRopeKv) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  ASSERT_EQ(kernels::small_gemm_init(), cudaSuccess);
  ASSERT_EQ(kernels::qkv_rope_mma_init(), cudaSuccess);
  std::mt19937 rng(5);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  const std::vector<Shape> shapes = {
      {1, 512, 8, 2, 64, 64, true, true, false},      // vegas-code-22m decoding
      {16, 512, 8, 2, 64, 64, true, true, false},     // a full tile of rows
      {7, 1024, 16, 8, 64, 32, true, false, true},    // two chunks per warp, partial rotary
      {3, 256, 4, 1, 128, 128, false, true, true},    // head_dim 128, bf16 input, 8 warps
      {16, 520, 2, 2, 64, 64, true, true, true},      // K ending inside a chunk, 9 warps
      {64, 512, 8, 2, 64, 64, true, true, false},     // four row tiles (blockIdx.y)
      {23, 1024, 16, 8, 64, 32, false, false, true},  // a partial second tile
      {112, 512, 8, 2, 64, 64, true, true, false},    // 16 sequences' verification at gamma 6
      {128, 256, 4, 1, 128, 128, false, true, true},  // eight row tiles, head_dim 128
      {448, 512, 8, 2, 64, 64, true, true, false},    // 64 sequences' verification at gamma 6
  };
  for (const Shape &s : shapes) {
    ASSERT_TRUE(kernels::qkv_rope_mma_supports(s.rows, s.k, s.hd));
    // Slots: 13 r mod n_slots is one-to-one for n_slots a power of two >= rows.
    int n_slots = 128;
    while (n_slots < s.rows) n_slots *= 2;
    const int heads_total = s.heads + 2 * s.kv_heads, width = heads_total * s.hd;
    const auto w = test::random_bf16(size_t(width) * s.k, rng, 1.0f / std::sqrt(float(s.k)));
    const auto xb = test::random_bf16(size_t(s.rows) * s.k, rng);
    const auto nw = test::random_bf16(s.k, rng, 0.1f, 1.0f);
    std::vector<float> xf(size_t(s.rows) * s.k);
    for (auto &v : xf) v = 3.0f * gauss(rng);
    const auto bias = test::random_bf16(width, rng, 0.5f);
    const auto qn = test::random_bf16(s.hd, rng, 0.5f, 1.0f),
               kn = test::random_bf16(s.hd, rng, 0.5f, 1.0f);
    std::vector<float> inv(s.rot / 2);
    for (int i = 0; i < s.rot / 2; ++i) inv[i] = float(std::pow(1e6, -2.0 * i / s.rot));
    std::vector<int32_t> pos(s.rows), slots(s.rows);
    for (int r = 0; r < s.rows; ++r) {
      pos[r] = (r * 7919) % 30000;
      slots[r] = r % 4 == 2 ? -1 : (r * 13) % n_slots;  // distinct slots; every 4th row padding
    }
    Dev<uint16_t> dw(w), dxb(xb), dnw(nw), dbias(bias), dqn(qn), dkn(kn);
    Dev<float> dxf(xf), dinv(inv);
    Dev<int32_t> dpos(pos), dslots(slots);

    // Both paths, each into its own poisoned outputs.
    struct Outputs {
      Dev<uint16_t> q, k, v;
      explicit Outputs(const Shape &s, int n_slots)
          : q(size_t(s.rows) * s.heads * s.hd),
            k(size_t(n_slots) * s.kv_heads * s.hd, 0x11),
            v(size_t(n_slots) * s.kv_heads * s.hd, 0x11) {}
    };
    Outputs fused(s, n_slots), split(s, n_slots);
    Dev<uint16_t> qkv(size_t(s.rows) * width);
    kernels::SmallGemmParams g;
    g.m = s.rows;
    g.n = width;
    g.k = s.k;
    g.w = dw.as<kernels::bf16>();
    if (s.norm_input) {
      g.x_f32 = dxf.get();
      g.norm_weight = dnw.as<kernels::bf16>();
    } else {
      g.x_bf16 = dxb.as<kernels::bf16>();
    }
    g.epilogue = kernels::SmallGemmParams::Epilogue::kStoreBf16;
    g.y_bf16 = qkv.as<kernels::bf16>();
    kernels::RopeKvParams r;
    r.qkv = qkv.as<kernels::bf16>();
    r.bias = s.bias ? dbias.as<kernels::bf16>() : nullptr;
    r.q_norm = s.qk_norm ? dqn.as<kernels::bf16>() : nullptr;
    r.k_norm = s.qk_norm ? dkn.as<kernels::bf16>() : nullptr;
    r.positions = dpos.get();
    r.slots = dslots.get();
    r.inv_freq = dinv.get();
    r.rot_dim = s.rot;
    r.attention_scaling = 1.1f;
    r.rows = s.rows;
    r.n_heads = s.heads;
    r.n_kv_heads = s.kv_heads;
    r.head_dim = s.hd;
    auto into = [&](Outputs &o) {
      r.q_out = o.q.as<kernels::bf16>();
      r.k_cache = o.k.as<kernels::bf16>();
      r.v_cache = o.v.as<kernels::bf16>();
    };
    into(split);
    CUDA_OK(kernels::small_gemm(g, nullptr));
    CUDA_OK(kernels::rope_kv(r, nullptr));
    into(fused);
    r.qkv = nullptr;  // the fused kernel must not read it
    CUDA_OK(kernels::qkv_rope_mma(g, r, nullptr));
    CUDA_OK(cudaDeviceSynchronize());

    const char *names[3] = {"q", "k", "v"};
    Dev<uint16_t> *got[3] = {&fused.q, &fused.k, &fused.v},
                  *want[3] = {&split.q, &split.k, &split.v};
    for (int i = 0; i < 3; ++i) {
      const auto a = got[i]->download(), b = want[i]->download();
      // Untouched entries (padding rows' and unused slots) keep their marker in both.
      std::vector<double> ref;
      std::vector<float> cmp;
      size_t markers = 0;
      for (size_t j = 0; j < a.size(); ++j) {
        if (b[j] == 0x1111) {
          EXPECT_EQ(a[j], 0x1111) << names[i] << " entry " << j << " written by the fused kernel";
          ++markers;
          continue;
        }
        ref.push_back(bf16_to_f32(b[j]));
        cmp.push_back(bf16_to_f32(a[j]));
      }
      const double err = test::rel_l2(cmp, ref);
      EXPECT_LT(err, 5e-3) << names[i] << ": rows " << s.rows << " k " << s.k << " hd " << s.hd;
      std::printf(
          "[qkv-rope] rows %2d k %4d heads %2d/%d hd %3d rot %3d: %s rel L2 %.2e (%zu "
          "untouched)\n",
          s.rows, s.k, s.heads, s.kv_heads, s.hd, s.rot, names[i], err, markers);
    }
  }
}

TEST(QkvRope, RefusesShapesItDoesNotServe) {
  // More rows than the tensor-core kernels take.
  EXPECT_FALSE(kernels::qkv_rope_mma_supports(kernels::kSmallGemmMmaMaxRows + 1, 512, 64));
  EXPECT_FALSE(kernels::qkv_rope_mma_supports(1, 2048, 64));   // K past 16 warps x 2 chunks
  EXPECT_FALSE(kernels::qkv_rope_mma_supports(1, 1024, 128));  // head_dim 128: K <= 512
  EXPECT_FALSE(kernels::qkv_rope_mma_supports(1, 512, 96));
  kernels::SmallGemmParams g;
  kernels::RopeKvParams r;
  g.m = r.rows = 1;
  g.k = 4096;
  r.head_dim = 64;
  EXPECT_EQ(kernels::qkv_rope_mma(g, r, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace vegas
