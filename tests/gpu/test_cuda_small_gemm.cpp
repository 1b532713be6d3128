// kernels/small_gemm (label `gpu`) against a double-precision reference of
// the path it replaces (rmsnorm -> bf16, GEMM with f32 accumulation, residual
// add or bf16 gate/up -> SwiGLU), for M = 1..16 rows, odd N and two K, every
// epilogue, and both input forms. Tolerances: bf16 outputs carry one bf16
// rounding (2^-9 relative) on top of f32 accumulation, so a relative L2 error
// of 5e-3 is generous but catches any indexing or fusion mistake (those give
// errors of order 1); f32 outputs (residual add, lm_head logits) are compared at 1e-4, or 1e-3
// after the RMSNorm prologue (see the comment at the check).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "small_gemm.cuh"

namespace vegas {
namespace {

using test::Dev;
using Epilogue = kernels::SmallGemmParams::Epilogue;

float bf(float v) {
  return bf16_to_f32(f32_to_bf16(v));
}

struct Case {
  int m, n, k;
  Epilogue epilogue;
  bool norm;            // f32 input with the RMSNorm prologue
  bool gather = false;  // with norm: rows picked from a larger input by x_row_index
};

TEST(SmallGemm, MatchesReferenceForEveryEpilogue) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  ASSERT_EQ(kernels::small_gemm_init(), cudaSuccess);
  std::mt19937 rng(11);
  const std::vector<Case> cases = {
      {1, 768, 512, Epilogue::kStoreBf16, true},
      {16, 768, 512, Epilogue::kStoreBf16, true},
      {3, 50, 1024, Epilogue::kStoreBf16, false},
      {1, 512, 512, Epilogue::kAddF32, false},
      {16, 512, 1024, Epilogue::kAddF32, false},
      {7, 1024, 512, Epilogue::kSwiglu, true},
      {16, 1024, 512, Epilogue::kSwiglu, true},
      {2, 17, 4096, Epilogue::kAddF32, false},
      // The lm_head form (f32 logits of gathered rows), and a K that ends
      // inside a 32-input chunk of the tensor-core kernel.
      {5, 8192, 512, Epilogue::kStoreF32, true, true},
      {16, 8200, 2048, Epilogue::kStoreF32, true, true},
      {9, 40, 1000, Epilogue::kStoreBf16, true},
      {16, 24, 1000, Epilogue::kAddF32, false},
      // More than one 16-row tile (blockIdx.y of the tensor-core kernel),
      // the last one partial; the lm_head form gathers rows across tiles.
      {64, 768, 512, Epilogue::kStoreBf16, true},
      {37, 1024, 512, Epilogue::kSwiglu, true},
      {40, 512, 1024, Epilogue::kAddF32, false},
      {33, 8192, 512, Epilogue::kStoreF32, true, true},
      // Verification of 16 sequences at gamma 6 (112 rows), and eight full tiles.
      {112, 768, 512, Epilogue::kStoreBf16, true},
      {112, 512, 1024, Epilogue::kAddF32, false},
      {128, 1024, 512, Epilogue::kSwiglu, true},
      {128, 8192, 512, Epilogue::kStoreF32, true, true},
      // 64 sequences' verification at gamma 6 (448 rows), under the 512-row limit.
      {448, 768, 512, Epilogue::kStoreBf16, true},
      {448, 1024, 512, Epilogue::kSwiglu, true},
      {512, 512, 1024, Epilogue::kAddF32, false},
  };
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (const Case &c : cases) {
    const int w_rows = c.epilogue == Epilogue::kSwiglu ? 2 * c.n : c.n;
    std::vector<uint16_t> w(static_cast<size_t>(w_rows) * c.k), xb(static_cast<size_t>(c.m) * c.k),
        nw(static_cast<size_t>(c.k));
    const int x_rows = c.gather ? c.m + 3 : c.m;
    std::vector<int32_t> row_index(static_cast<size_t>(c.m));
    for (int m = 0; m < c.m; ++m) row_index[m] = c.gather ? x_rows - 1 - 2 * m % x_rows : m;
    std::vector<float> xf(static_cast<size_t>(x_rows) * c.k), y0(static_cast<size_t>(c.m) * c.n);
    const float w_scale = 1.0f / std::sqrt(static_cast<float>(c.k));
    for (auto &v : w) v = f32_to_bf16(g(rng) * w_scale);
    for (auto &v : xb) v = f32_to_bf16(g(rng));
    for (auto &v : nw) v = f32_to_bf16(1.0f + 0.1f * g(rng));
    for (auto &v : xf) v = 3.0f * g(rng);
    for (auto &v : y0) v = g(rng);

    // Reference: the staged input row, then the products in double.
    std::vector<double> ref(static_cast<size_t>(c.m) * c.n);
    for (int m = 0; m < c.m; ++m) {
      std::vector<float> x(static_cast<size_t>(c.k));
      if (c.norm) {
        double ss = 0;
        const float *xr = &xf[size_t(row_index[m]) * c.k];
        for (int i = 0; i < c.k; ++i) ss += double(xr[i]) * xr[i];
        const float inv = 1.0f / std::sqrt(static_cast<float>(ss / c.k) + 1e-6f);
        for (int i = 0; i < c.k; ++i) x[i] = bf(xr[i] * inv * bf16_to_f32(nw[i]));
      } else {
        for (int i = 0; i < c.k; ++i) x[i] = bf16_to_f32(xb[m * c.k + i]);
      }
      auto dot = [&](int row) {
        double s = 0;
        for (int i = 0; i < c.k; ++i) s += double(bf16_to_f32(w[size_t(row) * c.k + i])) * x[i];
        return s;
      };
      for (int n = 0; n < c.n; ++n) {
        double v;
        if (c.epilogue == Epilogue::kSwiglu) {
          const double gate = bf(static_cast<float>(dot(n))),
                       up = bf(static_cast<float>(dot(c.n + n)));
          v = gate / (1.0 + std::exp(-gate)) * up;
        } else {
          v = dot(n);
          if (c.epilogue == Epilogue::kAddF32) v += y0[size_t(m) * c.n + n];
        }
        ref[size_t(m) * c.n + n] = v;
      }
    }

    Dev<uint16_t> w_d(w), xb_d(xb), nw_d(nw), ybf_d(static_cast<size_t>(c.m) * c.n);
    Dev<float> xf_d(xf), yf_d(y0);
    Dev<int32_t> index_d(row_index);
    kernels::SmallGemmParams p;
    p.m = c.m;
    p.n = c.n;
    p.k = c.k;
    p.w = w_d.as<kernels::bf16>();
    if (c.norm) {
      p.x_f32 = xf_d.get();
      p.norm_weight = nw_d.as<kernels::bf16>();
      if (c.gather) p.x_row_index = index_d.get();
    } else {
      p.x_bf16 = xb_d.as<kernels::bf16>();
    }
    p.epilogue = c.epilogue;
    p.y_bf16 = ybf_d.as<kernels::bf16>();
    p.y_f32 = yf_d.get();
    ASSERT_EQ(kernels::small_gemm(p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    double err;
    if (c.epilogue == Epilogue::kAddF32 || c.epilogue == Epilogue::kStoreF32) {
      err = test::rel_l2(yf_d.download(), ref);
      // Normalised inputs: the kernel's f32 sum of squares may round a few
      // staged inputs to the neighbouring bf16 (2^-8 of one of K terms).
      EXPECT_LT(err, c.norm ? 1e-3 : 1e-4) << "m " << c.m << " n " << c.n << " k " << c.k;
    } else {
      err = test::rel_l2(test::bf16_vec_to_float(ybf_d.download()), ref);
      EXPECT_LT(err, 5e-3) << "m " << c.m << " n " << c.n << " k " << c.k;
    }
    std::printf("[small-gemm] m %2d n %4d k %4d epilogue %d norm %d: rel L2 %.2e\n", c.m, c.n, c.k,
                static_cast<int>(c.epilogue), c.norm ? 1 : 0, err);
  }
}

// Random inputs of m rows for one GEMM form (f32 rows under an RMSNorm, or
// bf16 rows), and the outputs, as raw bits, of rows [first, first + rows)
// through `gemm` (empty where it refused the call).
struct BitsProblem {
  int n, k;
  Epilogue epilogue;
  bool norm;
  std::vector<float> y0;  // the outputs' values before the call (kAddF32 adds to them)
  std::unique_ptr<Dev<uint16_t>> w, xb, nw;
  std::unique_ptr<Dev<float>> xf;

  BitsProblem(int n_, int k_, int m, Epilogue e, bool norm_, std::mt19937 &rng)
      : n(n_), k(k_), epilogue(e), norm(norm_) {
    std::normal_distribution<float> g(0.0f, 1.0f);
    const int w_rows = e == Epilogue::kSwiglu ? 2 * n : n;
    std::vector<uint16_t> wh(size_t(w_rows) * k), xbh(size_t(m) * k), nwh(static_cast<size_t>(k));
    std::vector<float> xfh(size_t(m) * k);
    y0.resize(size_t(m) * n);
    for (auto &v : wh) v = f32_to_bf16(g(rng) / 16.0f);
    for (auto &v : xbh) v = f32_to_bf16(g(rng));
    for (auto &v : nwh) v = f32_to_bf16(1.0f + 0.1f * g(rng));
    for (auto &v : xfh) v = 3.0f * g(rng);
    for (auto &v : y0) v = g(rng);
    w = std::make_unique<Dev<uint16_t>>(wh);
    xb = std::make_unique<Dev<uint16_t>>(xbh);
    nw = std::make_unique<Dev<uint16_t>>(nwh);
    xf = std::make_unique<Dev<float>>(xfh);
  }

  template <typename Gemm>
  std::vector<uint32_t> run(int first, int rows, Gemm &&gemm) const {
    Dev<uint16_t> ybf(size_t(rows) * n);
    Dev<float> yf(
        std::vector<float>(y0.begin() + size_t(first) * n, y0.begin() + size_t(first + rows) * n));
    kernels::SmallGemmParams p;
    p.m = rows;
    p.n = n;
    p.k = k;
    p.w = w->as<kernels::bf16>();
    if (norm) {
      p.x_f32 = xf->get() + size_t(first) * k;
      p.norm_weight = nw->as<kernels::bf16>();
    } else {
      p.x_bf16 = xb->as<kernels::bf16>() + size_t(first) * k;
    }
    p.epilogue = epilogue;
    p.y_bf16 = ybf.as<kernels::bf16>();
    p.y_f32 = yf.get();
    const cudaError_t e = gemm(p);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint32_t> bits;
    if (e != cudaSuccess) return bits;
    if (epilogue == Epilogue::kSwiglu || epilogue == Epilogue::kStoreBf16) {
      for (uint16_t b : ybf.download()) bits.push_back(b);
    } else {
      for (float v : yf.download()) {
        uint32_t b;
        std::memcpy(&b, &v, sizeof b);
        bits.push_back(b);
      }
    }
    return bits;
  }
};

cudaError_t small_gemm_call(const kernels::SmallGemmParams &p) {
  return kernels::small_gemm(p, nullptr);
}

// A row's outputs are the same bits whatever else shares the call: a
// verification pass (many rows, several column tiles a block) must score a
// token exactly as the vanilla step of one or 16 rows would (greedy Vegas
// equals vanilla). Rows 0, 37 and 111 of 112- and 448-row calls against the
// same row alone, for the lm_head, SwiGLU and residual-add forms.
TEST(SmallGemm, RowsDoNotDependOnTheRestOfTheCall) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  ASSERT_EQ(kernels::small_gemm_init(), cudaSuccess);
  std::mt19937 rng(5);
  struct Form {
    int n, k;
    Epilogue epilogue;
  };
  for (const Form f : {Form{8192, 512, Epilogue::kStoreF32}, Form{1024, 512, Epilogue::kSwiglu},
                       Form{512, 1024, Epilogue::kAddF32}}) {
    for (const int m : {112, 448}) {
      const BitsProblem problem(f.n, f.k, m, f.epilogue, f.epilogue != Epilogue::kAddF32, rng);
      const std::vector<uint32_t> all = problem.run(0, m, small_gemm_call);
      ASSERT_EQ(all.size(), size_t(m) * f.n);
      for (const int row : {0, 37, 111}) {
        const std::vector<uint32_t> alone = problem.run(row, 1, small_gemm_call);
        const std::vector<uint32_t> in_all(all.begin() + size_t(row) * f.n,
                                           all.begin() + size_t(row + 1) * f.n);
        EXPECT_EQ(alone, in_all) << "n " << f.n << " m " << m << " row " << row;
      }
    }
  }
}

// The staged kernel (several row tiles) against the per-tile kernel, which
// small_gemm runs for a call of one row tile: with each tile count it allows
// (1-8 column tiles a block, at most two per warp, within its shared memory)
// and its own choice, every row's outputs are the same bits as those of its
// 16-row tile run alone, for every epilogue, both input forms, K of one to
// sixteen warps, ragged N and M. A count it does not support is refused.
TEST(SmallGemm, StagedKernelEqualsThePerTileKernel) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  ASSERT_EQ(kernels::small_gemm_init(), cudaSuccess);
  std::mt19937 rng(9);
  struct Form {
    int n, k;
    Epilogue epilogue;
    bool norm;
  };
  for (const Form f :
       {Form{520, 512, Epilogue::kStoreF32, true}, Form{1000, 512, Epilogue::kSwiglu, true},
        Form{512, 1024, Epilogue::kAddF32, false}, Form{136, 128, Epilogue::kStoreBf16, false},
        Form{264, 2048, Epilogue::kSwiglu, true}, Form{72, 256, Epilogue::kAddF32, true}}) {
    for (const int m : {17, 112, 200}) {
      const BitsProblem problem(f.n, f.k, m, f.epilogue, f.norm, rng);
      std::vector<uint32_t> per_tile;
      for (int first = 0; first < m; first += kernels::kSmallGemmTileRows) {
        const int rows = std::min(kernels::kSmallGemmTileRows, m - first);
        const std::vector<uint32_t> part = problem.run(first, rows, small_gemm_call);
        per_tile.insert(per_tile.end(), part.begin(), part.end());
      }
      ASSERT_EQ(per_tile.size(), size_t(m) * f.n);
      EXPECT_TRUE(kernels::small_gemm_staged_supports(f.k, 1));
      EXPECT_TRUE(kernels::small_gemm_staged_supports(f.k, 2));
      for (const int tiles : {0, 1, 2, 4, 8}) {
        const std::vector<uint32_t> staged =
            problem.run(0, m, [tiles](const kernels::SmallGemmParams &p) {
              return kernels::small_gemm_staged(p, nullptr, tiles);
            });
        if (tiles != 0 && !kernels::small_gemm_staged_supports(f.k, tiles)) {
          EXPECT_TRUE(staged.empty()) << "tiles " << tiles << " accepted at k " << f.k;
          continue;
        }
        EXPECT_EQ(staged, per_tile)
            << "n " << f.n << " k " << f.k << " m " << m << " tiles " << tiles;
      }
    }
  }
}

TEST(SmallGemm, RefusesShapesItDoesNotCover) {
  kernels::SmallGemmParams p;
  p.m = kernels::kSmallGemmMmaMaxRows + 1;
  p.n = 8;
  p.k = 64;
  EXPECT_FALSE(kernels::small_gemm_supports(p.m, p.k));
  // Past the tensor-core kernel's K, the CUDA-core kernel takes 16 rows at most.
  EXPECT_TRUE(kernels::small_gemm_supports(kernels::kSmallGemmMaxRows, 4096));
  EXPECT_FALSE(kernels::small_gemm_supports(kernels::kSmallGemmMaxRows + 1, 4096));
  EXPECT_FALSE(kernels::small_gemm_supports(1, 12));  // K not a multiple of 8
  EXPECT_EQ(kernels::small_gemm(p, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace vegas
