// The fp8 KV cache's writer (label `gpu`): rope_kv with k_scale / v_scale set
// stores each K and V head as e4m3 codes and one power-of-two scale
// (kernels/kv_fp8.cuh). What it proves, on heads whose magnitudes span 2^+-24:
//  - V heads (rope_kv copies them unchanged) get exactly the codes and scales
//    of the host's rounding (common/kv_fp8.h), which the CPU backend stores
//    and every GPU attention test checks the kernels' expansion against;
//    special heads too: all zeros, exact ties between two e4m3 numbers, a
//    largest magnitude of exactly 448 times a power of two;
//  - K heads (normed and rotated in f32 first) are within an fp8 step of the
//    bf16 path's K;
//  - padding rows (slot -1) write neither codes nor scales;
//  - the fused qkv_rope_mma writes the same fp8 cache as small_gemm + rope_kv
//    (up to the bf16 rounding of its GEMM, as in test_cuda_qkv_rope).
// The attention kernels reading fp8 caches are checked in the attention,
// verify and prefill tests (every case also with fp8 caches).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "../unit/support/golden.h"
#include "backend/cuda/cuda_backend.h"
#include "gpu_test_util.h"
#include "qkv_rope.cuh"
#include "rope_kv.cuh"
#include "small_gemm.cuh"

namespace vegas {
namespace {

using test::Dev;

constexpr int kRows = 24, kHeads = 8, kKvHeads = 2, kHd = 64, kSlots = 64;
constexpr int kWidth = (kHeads + 2 * kKvHeads) * kHd;
constexpr uint8_t kMarker = 0x11;

struct Fp8Out {
  Dev<uint16_t> q{size_t(kRows) * kHeads * kHd};
  Dev<uint8_t> k{size_t(kSlots) * kKvHeads * kHd, kMarker},
      v{size_t(kSlots) * kKvHeads * kHd, kMarker};
  Dev<float> ks{size_t(kSlots) * kKvHeads, kMarker}, vs{size_t(kSlots) * kKvHeads, kMarker};
  void into(kernels::RopeKvParams &r) const {
    r.q_out = q.as<kernels::bf16>();
    r.k_cache = k.as<kernels::bf16>();
    r.v_cache = v.as<kernels::bf16>();
    r.k_scale = ks.get();
    r.v_scale = vs.get();
  }
  // The values the codes stand for, per slot and head (NaN where unwritten).
  std::vector<float> values(const Dev<uint8_t> &codes, const Dev<float> &scales) const {
    const auto c = codes.download();
    const auto s = scales.download();
    std::vector<float> out(c.size());
    for (size_t i = 0; i < c.size(); ++i) out[i] = decode_e4m3(c[i]) * s[i / kHd];
    return out;
  }
};

// rope_kv's parameters for `rows` rows of the shape above (q and k normed
// with `norm`, full rotary), the qkv input and outputs left to the caller.
kernels::RopeKvParams rope_params(const Dev<uint16_t> &norm, const Dev<float> &inv_freq,
                                  const Dev<int32_t> &positions, const Dev<int32_t> &slots,
                                  int rows) {
  kernels::RopeKvParams r;
  r.q_norm = norm.as<kernels::bf16>();
  r.k_norm = norm.as<kernels::bf16>();
  r.positions = positions.get();
  r.slots = slots.get();
  r.inv_freq = inv_freq.get();
  r.rot_dim = kHd;
  r.rows = rows;
  r.n_heads = kHeads;
  r.n_kv_heads = kKvHeads;
  r.head_dim = kHd;
  return r;
}

// Row r's qkv: random bf16 heads, each scaled by its own power of two, and
// row 0's V heads special (zeros; ties; a maximum of 448 * 2^-3).
std::vector<uint16_t> make_qkv(std::mt19937 &rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> e(-24, 24);
  std::vector<uint16_t> qkv(size_t(kRows) * kWidth);
  for (int r = 0; r < kRows; ++r)
    for (int h = 0; h < kHeads + 2 * kKvHeads; ++h) {
      const int exp = e(rng);
      for (int d = 0; d < kHd; ++d)
        qkv[size_t(r) * kWidth + size_t(h) * kHd + d] = f32_to_bf16(std::ldexp(u(rng), exp));
    }
  const size_t v0 = size_t(kHeads + kKvHeads) * kHd;  // row 0, V head 0, then V head 1
  for (int d = 0; d < kHd; ++d) {
    qkv[v0 + d] = f32_to_bf16(0.0f);
    // Head 1: largest 448 / 8 (scale 2^-3 exactly), the others halfway
    // between neighbouring e4m3 numbers at that scale (ties to even).
    const float tie = (d % 2 ? 1.0625f : -1.1875f) * std::ldexp(1.0f, d % 5) / 8.0f;
    qkv[v0 + kHd + d] = f32_to_bf16(d == 0 ? 56.0f : tie);
  }
  return qkv;
}

TEST(KvFp8, RopeKvWritesTheHostsFp8Values) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(11);
  const auto qkv = make_qkv(rng);
  const auto kn = test::random_bf16(kHd, rng, 0.5f, 1.0f);
  std::vector<float> inv(kHd / 2);
  for (int i = 0; i < kHd / 2; ++i) inv[i] = float(std::pow(1e6, -2.0 * i / kHd));
  std::vector<int32_t> pos(kRows), slots(kRows);
  for (int r = 0; r < kRows; ++r) {
    pos[r] = (r * 977) % 9000;
    slots[r] = r % 5 == 3 ? -1 : (r * 13) % kSlots;  // distinct; every 5th row padding
  }
  Dev<uint16_t> dqkv(qkv), dkn(kn);
  Dev<float> dinv(inv);
  Dev<int32_t> dpos(pos), dslots(slots);
  kernels::RopeKvParams r = rope_params(dkn, dinv, dpos, dslots, kRows);
  r.qkv = dqkv.as<kernels::bf16>();
  Dev<uint16_t> q_bf(size_t(kRows) * kHeads * kHd), k_bf(size_t(kSlots) * kKvHeads * kHd),
      v_bf(size_t(kSlots) * kKvHeads * kHd);
  r.q_out = q_bf.as<kernels::bf16>();
  r.k_cache = k_bf.as<kernels::bf16>();
  r.v_cache = v_bf.as<kernels::bf16>();
  CUDA_OK(kernels::rope_kv(r, nullptr));
  Fp8Out fp8;
  fp8.into(r);
  CUDA_OK(kernels::rope_kv(r, nullptr));
  CUDA_OK(cudaDeviceSynchronize());

  const auto kb = k_bf.download(), vb = v_bf.download();
  const auto kc = fp8.k.download(), vc = fp8.v.download();
  const auto ks = fp8.ks.download(), vs = fp8.vs.download();
  EXPECT_EQ(fp8.q.download(), q_bf.download()) << "q is written as bf16 either way";
  int written = 0, k_checked = 0;
  for (int row = 0; row < kRows; ++row)
    for (int h = 0; h < kKvHeads; ++h) {
      const size_t head = size_t(row % 5 == 3 ? (row * 13) % kSlots : slots[row]) * kKvHeads + h;
      if (slots[row] < 0) {
        // The slot this padding row would have used is nobody's: untouched.
        EXPECT_EQ(vc[head * kHd], kMarker) << "padding row " << row << " wrote V";
        continue;
      }
      ++written;
      const std::vector<uint16_t> v_head(vb.begin() + head * kHd, vb.begin() + (head + 1) * kHd);
      const test::Fp8Cache want = test::to_fp8_cache(v_head, kHd);
      EXPECT_EQ(vs[head], want.scales[0]) << "row " << row << " V head " << h;
      for (int d = 0; d < kHd; ++d)
        ASSERT_EQ(vc[head * kHd + d], want.codes[size_t(d)])
            << "row " << row << " V head " << h << " dim " << d << " value "
            << bf16_to_f32(v_head[size_t(d)]);
      for (int d = 0; d < kHd; ++d) {
        const float ref = bf16_to_f32(kb[head * kHd + d]);
        const float got = decode_e4m3(kc[head * kHd + d]) * ks[head];
        // Half an fp8 step (2^-4 relative, 2^-10 of the scale among subnormals)
        // plus the bf16 reference's own rounding (2^-9).
        EXPECT_LE(std::fabs(got - ref), std::fabs(ref) * (0x1p-4f + 0x1p-8f) + ks[head] * 0x1p-10f)
            << "row " << row << " K head " << h << " dim " << d;
        ++k_checked;
      }
    }
  EXPECT_EQ(written,
            2 * int(std::count_if(slots.begin(), slots.end(), [](int s) { return s >= 0; })));
  EXPECT_EQ(vs[size_t(slots[0]) * kKvHeads], 1.0f) << "an all-zero head's scale";
  EXPECT_EQ(vs[size_t(slots[0]) * kKvHeads + 1], 0.125f) << "448 / 8 -> scale 2^-3";
  std::printf("[kv-fp8] %d heads written, %d K values within an fp8 step\n", written, k_checked);
}

TEST(KvFp8, FusedQkvRopeWritesTheSameFp8Cache) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  ASSERT_EQ(kernels::small_gemm_init(), cudaSuccess);
  ASSERT_EQ(kernels::qkv_rope_mma_init(), cudaSuccess);
  constexpr int kK = 512;
  ASSERT_TRUE(kernels::qkv_rope_mma_supports(16, kK, kHd));
  std::mt19937 rng(12);
  const auto w = test::random_bf16(size_t(kWidth) * kK, rng, 1.0f / std::sqrt(float(kK)));
  const auto x = test::random_bf16(size_t(16) * kK, rng);
  const auto kn = test::random_bf16(kHd, rng, 0.5f, 1.0f);
  std::vector<float> inv(kHd / 2);
  for (int i = 0; i < kHd / 2; ++i) inv[i] = float(std::pow(1e6, -2.0 * i / kHd));
  std::vector<int32_t> pos(16), slots(16);
  for (int r = 0; r < 16; ++r) pos[r] = 100 + r, slots[r] = r % 4 == 1 ? -1 : 3 * r;
  Dev<uint16_t> dw(w), dx(x), dkn(kn), qkv(size_t(16) * kWidth);
  Dev<float> dinv(inv);
  Dev<int32_t> dpos(pos), dslots(slots);
  kernels::SmallGemmParams g;
  g.m = 16;
  g.n = kWidth;
  g.k = kK;
  g.w = dw.as<kernels::bf16>();
  g.x_bf16 = dx.as<kernels::bf16>();
  g.epilogue = kernels::SmallGemmParams::Epilogue::kStoreBf16;
  g.y_bf16 = qkv.as<kernels::bf16>();
  kernels::RopeKvParams r = rope_params(dkn, dinv, dpos, dslots, 16);
  r.qkv = qkv.as<kernels::bf16>();
  Fp8Out split, fused;
  split.into(r);
  CUDA_OK(kernels::small_gemm(g, nullptr));
  CUDA_OK(kernels::rope_kv(r, nullptr));
  fused.into(r);
  r.qkv = nullptr;
  CUDA_OK(kernels::qkv_rope_mma(g, r, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  for (int kv = 0; kv < 2; ++kv) {
    const auto a = fused.values(kv ? fused.v : fused.k, kv ? fused.vs : fused.ks);
    const auto b = split.values(kv ? split.v : split.k, kv ? split.vs : split.ks);
    const auto ca = (kv ? fused.v : fused.k).download(), cb = (kv ? split.v : split.k).download();
    std::vector<float> got;
    std::vector<double> ref;
    for (size_t i = 0; i < a.size(); ++i) {
      if (cb[i] == kMarker && ca[i] == kMarker) continue;  // unwritten in both (or a 0x11 code)
      got.push_back(a[i]);
      ref.push_back(b[i]);
    }
    EXPECT_EQ(got.size(), size_t(12) * kKvHeads * kHd) << "12 rows write their heads";
    // Neighbouring bf16 GEMM outputs may land on neighbouring e4m3 numbers.
    EXPECT_LT(test::rel_l2(got, ref), 2e-2) << (kv ? "V" : "K");
  }
}

// The embedded model with the fp8 cache on CUDA and on the CPU (which rounds
// its f32 cache to the same fp8 values), beside both without it: a
// 300-token prefill in chunks, then 48 decode steps (the decode kernels read
// ahead of their PDL wait, where a stale row or scale would show). Per step,
// the relative L2 distance between logits: what fp8 changes on the CPU
// (f32 -> fp8), what it changes on CUDA (bf16 -> fp8), and CUDA fp8 against
// CPU fp8. A CUDA kernel that reads the fp8 cache wrongly moves its logits
// far more than the rounding itself does on the CPU; CUDA and the CPU compute
// K and V in bf16 and f32, so an element may land on the neighbouring e4m3
// number and the fp8 runs differ more than the default ones.
TEST(KvFp8, CudaMatchesCpuOnTheFp8Cache) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const auto make_cuda = [](const ModelConfig &c, const ModelWeights &w) {
    return create_cuda_backend(c, w, CudaBackendOptions{});
  };
  const std::string dir = golden::model_dir();
  golden::GoldenModel cpu(dir, 400, 128, false, golden::make_cpu, false);
  golden::GoldenModel cpu8(dir, 400, 128, false, golden::make_cpu, true);
  golden::GoldenModel gpu(dir, 400, 128, true, make_cuda, false);
  golden::GoldenModel gpu8(dir, 400, 128, true, make_cuda, true);
  std::mt19937 rng(21);
  std::uniform_int_distribution<int32_t> tok(0, cpu.vocab() - 1);
  std::vector<int32_t> prompt(300);
  for (int32_t &t : prompt) t = tok(rng);
  const size_t vocab = size_t(cpu.vocab());
  auto rel = [&](const std::vector<float> &a, const std::vector<float> &b) {
    double e = 0, r = 0;
    for (size_t i = 0; i < vocab; ++i)
      e += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), r += double(b[i]) * b[i];
    return std::sqrt(e / r);
  };
  golden::GoldenModel *models[4] = {&cpu, &cpu8, &gpu, &gpu8};
  std::vector<float> rows[4];
  double sum[3] = {0, 0, 0}, most[3] = {0, 0, 0};
  for (int step = -1; step < 48; ++step) {
    const int32_t t = tok(rng);
    for (int m = 0; m < 4; ++m) {
      const float *r = step < 0 ? models[m]->prefill(prompt, 128)
                                : models[m]->forward(&t, 1, SeqRows::Logits::kLast);
      rows[m].assign(r, r + vocab);
    }
    const double e[3] = {rel(rows[1], rows[0]), rel(rows[3], rows[2]), rel(rows[3], rows[1])};
    for (int k = 0; k < 3; ++k) sum[k] += e[k], most[k] = std::max(most[k], e[k]);
  }
  const char *what[3] = {"fp8 on the CPU (vs f32)", "fp8 on CUDA (vs bf16)", "CUDA fp8 vs CPU fp8"};
  for (int k = 0; k < 3; ++k)
    std::printf("[kv-fp8] %-24s rel L2 mean %.2e max %.2e over 49 steps\n", what[k], sum[k] / 49,
                most[k]);
  EXPECT_LT(sum[1], 2.0 * sum[0]) << "CUDA's fp8 cache moves the logits more than the rounding";
  EXPECT_LT(sum[2], sum[0]) << "CUDA and CPU fp8 further apart than fp8 and f32 on the CPU";
}

}  // namespace
}  // namespace vegas
