// Quantized weights on the GPU (label `gpu`): kernels::quant_gemv and
// quant_dequantize against the host's GGUF dequantization of the same Q8_0,
// Q4_0, Q4_K, Q5_K and Q6_K blocks (and F8 codes times their group scales),
// and models whose matrices are kept quantized (Q8_0; Q4_K_M- and Q5_K_M-like
// mixes with Q6_K; F8) against the same models with those values as bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <vector>

#include "../unit/support/golden.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_buffer.h"
#include "common/bf16.h"
#include "gguf/ggml_repack.h"
#include "gguf/ggml_types.h"
#include "model/fp8_weights.h"
#include "quant_gemv.cuh"
#include "swiglu.cuh"

namespace vegas {
namespace {

using kernels::QuantFormat;

// F8 matrices are summed in slices only where VEGAS_CUDA_QUANT_SPLIT_ROWS_F8
// says (quant_gemv_split): the tests check that path too, at the other
// formats' limit. Set before main, ahead of quant_gemv's first read.
[[maybe_unused]] const bool kF8Slices = setenv("VEGAS_CUDA_QUANT_SPLIT_ROWS_F8", "8192", 0) == 0;

bool have_gpu() {
  return cuda_device_count() > 0;
}

uint16_t f32_to_f16(float x) {
  const __half h = __float2half(x);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

constexpr QuantFormat kFormats[] = {QuantFormat::kQ8_0, QuantFormat::kQ4_0, QuantFormat::kQ4_K,
                                    QuantFormat::kQ5_K, QuantFormat::kQ6_K, QuantFormat::kF8};

uint32_t ggml_type_of(QuantFormat f) {
  switch (f) {
    case QuantFormat::kQ8_0:
      return gguf::kGgmlQ8_0;
    case QuantFormat::kQ4_0:
      return gguf::kGgmlQ4_0;
    case QuantFormat::kQ4_K:
      return gguf::kGgmlQ4_K;
    case QuantFormat::kQ5_K:
      return gguf::kGgmlQ5_K;
    case QuantFormat::kQ6_K:
      return gguf::kGgmlQ6_K;
    case QuantFormat::kF8:
      break;
  }
  return 0;
}

// n rows of k random e4m3 codes (no NaN code) and one scale in [lo, hi] per
// kF8Group values of a row: the codes, the scales, and their values.
struct Fp8Matrix {
  std::vector<uint8_t> codes;
  std::vector<float> scales, values;
};
Fp8Matrix random_fp8(int64_t n, int64_t k, std::mt19937 &rng, float lo, float hi) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(lo, hi);
  Fp8Matrix m;
  m.codes.resize(static_cast<size_t>(n * k));
  for (uint8_t &c : m.codes) {
    c = static_cast<uint8_t>(byte(rng));
    if ((c & 0x7f) == 0x7f) c ^= 1;  // S.1111.111 is NaN
  }
  m.scales.resize(static_cast<size_t>(n * (k / kernels::kF8Group)));
  for (float &x : m.scales) x = scale(rng);
  m.values.resize(m.codes.size());
  for (size_t i = 0; i < m.values.size(); ++i)
    m.values[i] = fp8_e4m3_to_f32(m.codes[i]) * m.scales[i / kernels::kF8Group];
  return m;
}

// n rows of k values as GGML blocks: random bytes, then f16 scales in
// [lo, hi] where the format keeps them (Q8_0 / Q4_0: the first two bytes;
// Q4_K, Q5_K: d and dmin, the first four; Q6_K: d, the last two).
std::vector<uint8_t> random_blocks(QuantFormat f, int64_t n, int64_t k, std::mt19937 &rng,
                                   float lo = 1.0f / 256, float hi = 1.0f / 8) {
  const gguf::GgmlTypeInfo &info = *gguf::ggml_type_info(ggml_type_of(f));
  std::vector<uint8_t> raw(static_cast<size_t>(n * k / info.block_elems * info.block_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(lo, hi);
  for (size_t b = 0; b < raw.size(); b += static_cast<size_t>(info.block_bytes)) {
    for (int i = 0; i < info.block_bytes; ++i) raw[b + static_cast<size_t>(i)] = uint8_t(byte(rng));
    std::vector<size_t> at = {0};
    if (f == QuantFormat::kQ4_K || f == QuantFormat::kQ5_K) at = {0, 2};
    if (f == QuantFormat::kQ6_K) at = {208};
    for (const size_t o : at) {
      const uint16_t d = f32_to_f16(scale(rng));
      std::memcpy(&raw[b + o], &d, 2);
    }
  }
  return raw;
}

struct DeviceQuantMatrix {
  cuda::DeviceBuffer qs, scales;
  kernels::QuantMatrix m;
};

DeviceQuantMatrix upload_fp8(const Fp8Matrix &h, int64_t n, int64_t k) {
  DeviceQuantMatrix d;
  d.qs.allocate(h.codes.size(), "test");
  cudaMemcpy(d.qs.get(), h.codes.data(), h.codes.size(), cudaMemcpyHostToDevice);
  d.scales.allocate(h.scales.size() * 4, "test");
  cudaMemcpy(d.scales.get(), h.scales.data(), h.scales.size() * 4, cudaMemcpyHostToDevice);
  d.m.format = QuantFormat::kF8;
  d.m.qs = d.qs.get<uint8_t>();
  d.m.scales_f32 = d.scales.get<float>();
  d.m.n = static_cast<int32_t>(n);
  d.m.k = static_cast<int32_t>(k);
  return d;
}

DeviceQuantMatrix upload(QuantFormat f, const std::vector<uint8_t> &raw, int64_t n, int64_t k) {
  std::vector<uint8_t> qs(static_cast<size_t>(n * kernels::quant_row_bytes(f, k)));
  std::vector<uint16_t> scales(static_cast<size_t>(n * kernels::quant_row_scales(f, k)));
  gguf::split_ggml_blocks(ggml_type_of(f), raw.data(), n, k, qs.data(), scales.data());
  DeviceQuantMatrix d;
  d.qs.allocate(qs.size(), "test");
  cudaMemcpy(d.qs.get(), qs.data(), qs.size(), cudaMemcpyHostToDevice);
  if (!scales.empty()) {
    d.scales.allocate(scales.size() * 2, "test");
    cudaMemcpy(d.scales.get(), scales.data(), scales.size() * 2, cudaMemcpyHostToDevice);
  }
  d.m.format = f;
  d.m.qs = d.qs.get<uint8_t>();
  d.m.scales = scales.empty() ? nullptr : d.scales.get<kernels::f16>();
  d.m.n = static_cast<int32_t>(n);
  d.m.k = static_cast<int32_t>(k);
  return d;
}

// A random matrix in format f on the device, and its values as the host
// dequantizes them (gguf::dequantize; F8: code times scale in f32).
struct TestMatrix {
  std::vector<float> w;
  DeviceQuantMatrix d;
};
TestMatrix random_matrix(QuantFormat f, int64_t n, int64_t k, std::mt19937 &rng) {
  TestMatrix t;
  if (f == QuantFormat::kF8) {
    const Fp8Matrix h = random_fp8(n, k, rng, 1.0f / 4096, 1.0f / 64);
    t.w = h.values;
    t.d = upload_fp8(h, n, k);
    return t;
  }
  const std::vector<uint8_t> raw = random_blocks(f, n, k, rng);
  t.w.resize(static_cast<size_t>(n * k));
  gguf::dequantize(ggml_type_of(f), raw.data(), n * k, t.w.data());
  t.d = upload(f, raw, n, k);
  return t;
}

// Proves quant_gemv computes x · Wᵀ for every format, 1, 3 and 8 input rows
// (and 20 and 32 on the tensor cores: row_counts),
// output rows that leave a block's warps idle, K of one to sixteen warp steps
// (odd counts included: the loop takes two steps a trip), rows summed whole
// and in two slices of k (quant_gemv_split: 37 x 4096, 37 x 8192),
// and each epilogue (f32 stored or added to, bf16, f32 stored into a wider
// output, ldy), against f64 sums over the host's dequantization of the same
// blocks (gguf::dequantize).
// Every format twice: on the CUDA cores and on the tensor cores
// (QuantGemvParams::tensor_cores).
struct Variant {
  QuantFormat format;
  bool tensor_cores;
};
// The input-row counts a test runs a variant at: 1, 3 and 8, and on the
// tensor cores (but F8) 20 and 32 as well (two and four n tiles).
std::vector<int> row_counts(const Variant &v) {
  if (v.tensor_cores && v.format != QuantFormat::kF8) return {1, 3, 8, 20, 32};
  return {1, 3, 8};
}

std::vector<Variant> variants() {
  std::vector<Variant> v;
  for (const QuantFormat f : kFormats) v.push_back({f, false});
  for (const QuantFormat f : kFormats) v.push_back({f, true});
  return v;
}

TEST(CudaQuantGemv, MatchesHostReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (const Variant &v : variants())
    for (const auto &[n, k] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1024}, {37, 3072}, {300, 5120}, {5, 1536}, {37, 4096}, {37, 8192}})
      for (const int m : row_counts(v)) {
        const auto [f, tensor_cores] = v;
        if (k % kernels::quant_gemv_k_align(f) != 0) continue;  // 1,536: an odd count of steps
        const TestMatrix t = random_matrix(f, n, k, rng);
        const std::vector<float> &w = t.w;
        std::vector<uint16_t> x(static_cast<size_t>(m * k));
        for (uint16_t &v : x) v = f32_to_bf16(normal(rng));
        const int64_t wide = n + 3;  // the ldy epilogue's row stride
        std::vector<float> y0(static_cast<size_t>(m * wide));
        for (float &v : y0) v = normal(rng);
        const DeviceQuantMatrix &d = t.d;
        cuda::DeviceBuffer xd, yd;
        xd.allocate(x.size() * 2, "test");
        yd.allocate(y0.size() * 4, "test");
        cudaMemcpy(xd.get(), x.data(), x.size() * 2, cudaMemcpyHostToDevice);
        for (int epilogue = 0; epilogue < 4; ++epilogue) {  // f32 store, add, bf16, ldy
          cudaMemcpy(yd.get(), y0.data(), y0.size() * 4, cudaMemcpyHostToDevice);
          kernels::QuantGemvParams p;
          p.w = d.m;
          p.x = xd.get<kernels::bf16>();
          p.m = m;
          if (epilogue != 2)
            p.y_f32 = yd.get<float>();
          else
            p.y_bf16 = yd.get<kernels::bf16>();
          p.accumulate = epilogue == 1;
          p.tensor_cores = tensor_cores;
          if (epilogue == 3) p.ldy = static_cast<int32_t>(wide);
          const int64_t ld = epilogue == 3 ? wide : n;
          ASSERT_EQ(kernels::quant_gemv(p, nullptr), cudaSuccess);
          std::vector<float> y(y0.size());
          std::vector<uint16_t> yb(y0.size());
          if (epilogue != 2)
            cudaMemcpy(y.data(), yd.get(), y.size() * 4, cudaMemcpyDeviceToHost);
          else
            cudaMemcpy(yb.data(), yd.get(), yb.size() * 2, cudaMemcpyDeviceToHost);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          for (int r = 0; r < m; ++r)
            for (int64_t o = 0; o < n; ++o) {
              double ref = 0, mag = 0;
              for (int64_t i = 0; i < k; ++i) {
                const double t = double(bf16_to_f32(x[size_t(r * k + i)])) * w[size_t(o * k + i)];
                ref += t;
                mag += std::fabs(t);
              }
              const size_t at = static_cast<size_t>(r * ld + o);
              if (epilogue == 1) ref += y0[at];
              const double got = epilogue != 2 ? y[at] : bf16_to_f32(yb[at]);
              const double tol =
                  epilogue != 2 ? 1e-5 * mag + 1e-6 : 4e-3 * std::fabs(ref) + 1e-5 * mag;
              ASSERT_NEAR(got, ref, tol)
                  << "format " << int(f) << (tensor_cores ? " tensor cores" : "") << " n " << n
                  << " k " << k << " m " << m << " epilogue " << epilogue << " row " << r << " out "
                  << o;
            }
          if (epilogue == 3)  // the columns past n of each row are untouched
            for (int r = 0; r < m; ++r)
              for (int64_t o = n; o < wide; ++o)
                ASSERT_EQ(y[size_t(r * wide + o)], y0[size_t(r * wide + o)]) << "ldy padding";
        }
      }
}

// Proves a row's sums do not depend on how many input rows share the launch:
// the kernels for one input row and for several (other rows a warp, other
// steps a trip) add each lane's products in the same order, so that a
// verification pass's row scores its token exactly as a vanilla step's row
// does. One row at a time against eight together (32 on the tensor cores,
// four n tiles), bit for bit, rows summed whole (k up to 3072) and in two
// slices (4096, 8192; quant_gemv_split). The tensor-core kernels too: an
// input row is column 0 alone and column r of up to 32, and MMA columns do
// not mix.
TEST(CudaQuantGemv, RowSumsDoNotDependOnTheRowCount) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (const Variant &v : variants())
    for (const int64_t k : {1536, 2048, 3072, 4096, 8192}) {
      const auto [f, tensor_cores] = v;
      const int kRows = row_counts(v).back();  // the most a launch takes
      if (k % kernels::quant_gemv_k_align(f) != 0) continue;
      const int64_t n = 300;
      const TestMatrix t = random_matrix(f, n, k, rng);
      std::vector<uint16_t> x(static_cast<size_t>(kRows * k));
      for (uint16_t &v : x) v = f32_to_bf16(normal(rng));
      cuda::DeviceBuffer xd, yd;
      xd.allocate(x.size() * 2, "test");
      yd.allocate(static_cast<size_t>(kRows * n) * 4, "test");
      cudaMemcpy(xd.get(), x.data(), x.size() * 2, cudaMemcpyHostToDevice);
      auto run = [&](int first, int m) {
        kernels::QuantGemvParams p;
        p.w = t.d.m;
        p.x = xd.get<kernels::bf16>() + first * k;
        p.m = m;
        p.y_f32 = yd.get<float>() + first * n;
        p.tensor_cores = tensor_cores;
        EXPECT_EQ(kernels::quant_gemv(p, nullptr), cudaSuccess);
      };
      run(0, kRows);
      std::vector<float> together(static_cast<size_t>(kRows * n)), alone(together.size());
      cudaMemcpy(together.data(), yd.get(), together.size() * 4, cudaMemcpyDeviceToHost);
      for (int r = 0; r < kRows; ++r) run(r, 1);
      cudaMemcpy(alone.data(), yd.get(), alone.size() * 4, cudaMemcpyDeviceToHost);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(std::memcmp(together.data(), alone.data(), together.size() * 4), 0)
          << "format " << int(f) << (tensor_cores ? " tensor cores" : "") << " k " << k;
    }
}

// Proves the SwiGLU epilogue (QuantGemvParams::swiglu_up) writes the bits
// of the two launches it replaces, the gate and up GEMVs into one bf16
// gate|up row and then swiglu(): for every format that takes it on both
// kernels, 1, 3 and 8 input rows (20 and 32 too on the tensor cores but for
// F8), outputs that leave a block part idle (37, 300), rows summed whole
// (k 1024) and in two slices (4096, 8192), and an output stride wider than
// the rows (the columns past them untouched). And that quant_gemv refuses
// what the epilogue cannot do.
TEST(CudaQuantGemv, SwigluEpilogueEqualsGemvThenSwiglu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(13);
  std::normal_distribution<float> normal;
  int checked = 0;
  for (const Variant &v : variants()) {
    const auto [f, tensor_cores] = v;
    if (!kernels::quant_gemv_swiglu_supports(f)) continue;
    for (const auto &[n, k] :
         std::vector<std::pair<int64_t, int64_t>>{{37, 1024}, {300, 4096}, {37, 8192}})
      for (const int m : row_counts(v)) {
        const TestMatrix gate = random_matrix(f, n, k, rng), up = random_matrix(f, n, k, rng);
        std::vector<uint16_t> x(static_cast<size_t>(m * k));
        for (uint16_t &v : x) v = f32_to_bf16(normal(rng));
        const int64_t ldy = n + 5;
        const uint16_t poison = 0x7fc1;  // a NaN no output is
        std::vector<uint16_t> y0(static_cast<size_t>(m * ldy), poison);
        cuda::DeviceBuffer xd, gate_up, act, fused;
        xd.allocate(x.size() * 2, "test");
        gate_up.allocate(static_cast<size_t>(m * 2 * n) * 2, "test");
        act.allocate(static_cast<size_t>(m * n) * 2, "test");
        fused.allocate(y0.size() * 2, "test");
        cudaMemcpy(xd.get(), x.data(), x.size() * 2, cudaMemcpyHostToDevice);
        cudaMemcpy(fused.get(), y0.data(), y0.size() * 2, cudaMemcpyHostToDevice);
        kernels::QuantGemvParams p;
        p.x = xd.get<kernels::bf16>();
        p.m = m;
        p.tensor_cores = tensor_cores;
        p.ldy = static_cast<int32_t>(2 * n);
        for (int half = 0; half < 2; ++half) {  // the reference: two GEMVs, then swiglu
          p.w = (half == 0 ? gate : up).d.m;
          p.y_bf16 = gate_up.get<kernels::bf16>() + half * n;
          ASSERT_EQ(kernels::quant_gemv(p, nullptr), cudaSuccess);
        }
        kernels::SwigluParams sp;
        sp.gate_up = gate_up.get<kernels::bf16>();
        sp.out = act.get<kernels::bf16>();
        sp.rows = m;
        sp.inter = static_cast<int32_t>(n);
        ASSERT_EQ(kernels::swiglu(sp, nullptr), cudaSuccess);
        p.w = gate.d.m;
        p.swiglu_up = up.d.m;
        p.y_bf16 = fused.get<kernels::bf16>();
        p.ldy = static_cast<int32_t>(ldy);
        ASSERT_EQ(kernels::quant_gemv(p, nullptr), cudaSuccess);
        std::vector<uint16_t> want(static_cast<size_t>(m * n)), got(y0.size());
        cudaMemcpy(want.data(), act.get(), want.size() * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(got.data(), fused.get(), got.size() * 2, cudaMemcpyDeviceToHost);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        for (int r = 0; r < m; ++r)
          for (int64_t o = 0; o < ldy; ++o) {
            const uint16_t g = got[static_cast<size_t>(r * ldy + o)];
            ASSERT_EQ(g, o < n ? want[static_cast<size_t>(r * n + o)] : poison)
                << "format " << int(f) << (tensor_cores ? " tensor cores" : "") << " n " << n
                << " k " << k << " m " << m << " row " << r << " out " << o;
          }
        ++checked;
      }
  }
  // F8, Q8_0 and Q4_0 on both kernels, three shapes; Q8_0 and Q4_0 on the
  // tensor cores at five row counts, the others at three.
  EXPECT_EQ(checked, 3 * (4 * 3 + 2 * 5));

  // What the epilogue cannot do is refused.
  const TestMatrix g8 = random_matrix(QuantFormat::kF8, 16, 1024, rng);
  const TestMatrix u8 = random_matrix(QuantFormat::kF8, 16, 1024, rng);
  const TestMatrix q8 = random_matrix(QuantFormat::kQ8_0, 16, 1024, rng);
  const TestMatrix k4 = random_matrix(QuantFormat::kQ4_K, 16, 1024, rng);
  const TestMatrix k4u = random_matrix(QuantFormat::kQ4_K, 16, 1024, rng);
  const TestMatrix g8_short = random_matrix(QuantFormat::kF8, 8, 1024, rng);
  cuda::DeviceBuffer xd, yd;
  xd.allocate(1024 * 2, "test");
  yd.allocate(16 * 4, "test");
  auto launch = [&](const TestMatrix &g, const TestMatrix &u, bool f32, bool accumulate) {
    kernels::QuantGemvParams p;
    p.w = g.d.m;
    p.swiglu_up = u.d.m;
    p.x = xd.get<kernels::bf16>();
    p.m = 1;
    if (f32)
      p.y_f32 = yd.get<float>();
    else
      p.y_bf16 = yd.get<kernels::bf16>();
    p.accumulate = accumulate;
    return kernels::quant_gemv(p, nullptr);
  };
  EXPECT_EQ(launch(g8, u8, false, false), cudaSuccess);
  EXPECT_EQ(launch(g8, u8, true, false), cudaErrorInvalidValue) << "f32 output";
  EXPECT_EQ(launch(g8, u8, false, true), cudaErrorInvalidValue) << "accumulate";
  EXPECT_EQ(launch(g8, q8, false, false), cudaErrorInvalidValue) << "formats differ";
  EXPECT_EQ(launch(g8_short, u8, false, false), cudaErrorInvalidValue) << "row counts differ";
  EXPECT_EQ(launch(k4, k4u, false, false), cudaErrorInvalidValue) << "a K format";
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Proves quant_dequantize writes every value bit for bit as the host's
// dequantization rounded to bf16 (K formats: K of two super-blocks, below
// the GEMV's 1,024).
TEST(CudaQuantDequantize, BitExact) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(11);
  for (const QuantFormat f : kFormats) {
    const int64_t n = 129, k = 512;
    const TestMatrix t = random_matrix(f, n, k, rng);
    const std::vector<float> &w = t.w;
    const DeviceQuantMatrix &d = t.d;
    cuda::DeviceBuffer out;
    out.allocate(w.size() * 2, "test");
    kernels::QuantDequantizeParams p;
    p.w = d.m;
    p.out = out.get<kernels::bf16>();
    ASSERT_EQ(kernels::quant_dequantize(p, nullptr), cudaSuccess);
    std::vector<uint16_t> got(w.size());
    cudaMemcpy(got.data(), out.get(), got.size() * 2, cudaMemcpyDeviceToHost);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (size_t i = 0; i < w.size(); ++i)
      ASSERT_EQ(got[i], f32_to_bf16(w[i])) << "format " << int(f) << " value " << i;
  }
}

// Q8_0 blocks of a bf16 matrix: scale max|x| / 127 per 32 values.
std::vector<uint8_t> quantize_q8_0(const TensorView &t) {
  const int64_t n = t.numel();
  std::vector<float> x(static_cast<size_t>(n));
  t.to_f32(x.data());
  std::vector<uint8_t> raw(static_cast<size_t>(n / 32 * 34));
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[size_t(b * 32 + i)]));
    const uint16_t d = f32_to_f16(amax / 127.0f);
    const float scale = f16_to_f32(d);
    std::memcpy(&raw[size_t(b * 34)], &d, 2);
    for (int i = 0; i < 32; ++i) {
      const float q = scale > 0 ? std::round(x[size_t(b * 32 + i)] / scale) : 0.0f;
      raw[size_t(b * 34 + 2 + i)] =
          static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127.f, 127.f)));
    }
  }
  return raw;
}

// Proves a model whose every layer matrix is kept as Q8_0 blocks (forced:
// a model this small keeps bf16 by default) computes
// what the same model with those blocks' values as bf16 computes: a prompt
// of 96 rows (the dequantize + cuBLASLt path), 24 single-row steps and 4
// of five rows (quant_gemv; at five rows with the SwiGLU epilogue), logits
// within bf16 weight rounding, the same top token.
TEST(CudaQuantModel, Q8_0MatricesTrackTheirBf16Values) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  setenv("VEGAS_CUDA_QUANT_WEIGHTS", "1", 1);  // read once, at the first upload
  const std::string dir = test::embedded_model_dir();
  const ModelConfig config = load_model_config(dir + "/config.json");
  const auto source = WeightStore::open(dir);
  std::map<std::string, TensorView> quantized, plain;
  std::vector<std::shared_ptr<const void>> owners;
  for (const auto &[name, view] : source->tensors()) {
    TensorView q = view;
    if (view.shape.size() == 2 && name.find("layers.") != std::string::npos) {
      auto raw = std::make_shared<std::vector<uint8_t>>(quantize_q8_0(view));
      auto values = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(view.numel()));
      std::vector<float> f(values->size());
      gguf::dequantize(gguf::kGgmlQ8_0, raw->data(), view.numel(), f.data());
      for (size_t i = 0; i < f.size(); ++i) (*values)[i] = f32_to_bf16(f[i]);
      q.dtype = DType::kBF16;
      q.data = values->data();
      q.nbytes = values->size() * 2;
      q.ggml_blocks = raw->data();
      q.ggml_type = gguf::kGgmlQ8_0;
      owners.push_back(raw);
      owners.push_back(values);
    }
    quantized[name] = q;
    TensorView p = q;
    p.ggml_blocks = nullptr;
    plain[name] = p;
  }
  owners.push_back(std::shared_ptr<const void>(source.get(), [](const void *) {}));
  auto make_cuda = [](const ModelConfig &c, const ModelWeights &w) {
    return create_cuda_backend(c, w, CudaBackendOptions{});
  };
  golden::GoldenModel a(config, WeightStore::adopt(quantized, owners, "q8_0"), 256, 128, false,
                        make_cuda);
  golden::GoldenModel b(config, WeightStore::adopt(plain, owners, "bf16"), 256, 128, false,
                        make_cuda);
  std::vector<int32_t> prompt(96);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919 + 13) % 8000);
  const size_t vocab = static_cast<size_t>(config.vocab_size);
  auto compare = [&](const float *x, const float *y, size_t rows, const char *what) {
    double err = 0, ref = 0;
    size_t same_top = 0;
    for (size_t r = 0; r < rows; ++r) {
      same_top += golden::argmax(x + r * vocab, int32_t(vocab)) ==
                  golden::argmax(y + r * vocab, int32_t(vocab));
      for (size_t i = 0; i < vocab; ++i) {
        const double d = double(x[r * vocab + i]) - y[r * vocab + i];
        err += d * d;
        ref += double(y[r * vocab + i]) * y[r * vocab + i];
      }
    }
    EXPECT_LT(std::sqrt(err / ref), 2e-2) << what;
    EXPECT_GE(same_top * 10, rows * 9) << what;
    std::cout << "[quant] " << what << ": relative L2 " << std::sqrt(err / ref) << ", top token "
              << same_top << "/" << rows << "\n";
  };
  const float *la = a.forward(prompt.data(), 96, SeqRows::Logits::kAll);
  std::vector<float> pa(la, la + 96 * vocab);
  const float *lb = b.forward(prompt.data(), 96, SeqRows::Logits::kAll);
  compare(pa.data(), lb, 96, "96-row prefill");
  std::vector<float> da, db;
  int32_t token = prompt.back();
  for (int step = 0; step < 24; ++step) {
    token = (token * 31 + 7) % 8000;
    const float *sa = a.forward(&token, 1, SeqRows::Logits::kLast);
    da.insert(da.end(), sa, sa + vocab);
    const float *sb = b.forward(&token, 1, SeqRows::Logits::kLast);
    db.insert(db.end(), sb, sb + vocab);
  }
  compare(da.data(), db.data(), 24, "single-row steps");
  // Steps of five rows (a verification's shape): quant_gemv at several input
  // rows, the gate|up GEMV with its SwiGLU epilogue where the format has one.
  std::vector<float> va, vb;
  for (int step = 0; step < 4; ++step) {
    int32_t rows[5];
    for (int32_t &t : rows) t = token = (token * 31 + 7) % 8000;
    const float *sa = a.forward(rows, 5, SeqRows::Logits::kAll);
    va.insert(va.end(), sa, sa + 5 * vocab);
    const float *sb = b.forward(rows, 5, SeqRows::Logits::kAll);
    vb.insert(vb.end(), sb, sb + 5 * vocab);
  }
  compare(va.data(), vb.data(), 20, "five-row steps");
}

// A random Qwen3 of hidden 1024 (K of the K formats' GEMV is a multiple of
// 1,024) whose matrices are kept in the formats `format_for` names ("q", "k",
// "v", "o", "gate", "up", "down", "head"), against the same model with those
// values as bf16: a 64-row prompt (dequantize + cuBLASLt, each row range
// into its rows), 16 single-row steps and 4 of five rows (quant_gemv, each
// range into its columns), logits within bf16 weight rounding; and kept
// quantized, not fallen back to bf16: the matrices' bytes at most
// `bytes_ratio` of bf16's.
void check_model_tracks_bf16(const char *label, QuantFormat (*format_for)(const std::string &),
                             double bytes_ratio) {
  setenv("VEGAS_CUDA_QUANT_WEIGHTS", "1", 1);  // read once, at the first upload
  const ModelConfig config = parse_model_config(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024,
    "intermediate_size": 2048, "num_hidden_layers": 2, "num_attention_heads": 8,
    "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 1024, "rms_norm_eps": 1e-6,
    "tie_word_embeddings": false, "rope_theta": 1000000.0, "max_position_embeddings": 4096})",
                                                label);
  std::mt19937 rng(5);
  std::map<std::string, TensorView> quantized, plain;
  std::vector<std::shared_ptr<const void>> owners;
  auto bf16_tensor = [&](const std::string &name, std::vector<int64_t> shape,
                         const std::vector<float> &values) {
    auto bits = std::make_shared<std::vector<uint16_t>>(values.size());
    for (size_t i = 0; i < values.size(); ++i) (*bits)[i] = f32_to_bf16(values[i]);
    TensorView t;
    t.name = name;
    t.dtype = DType::kBF16;
    t.shape = std::move(shape);
    t.data = bits->data();
    t.nbytes = bits->size() * 2;
    owners.push_back(bits);
    quantized[name] = t;
    plain[name] = t;
  };
  auto vector_of = [&](const std::string &name, int64_t n, float center, float spread) {
    std::uniform_real_distribution<float> u(center - spread, center + spread);
    std::vector<float> v(static_cast<size_t>(n));
    for (float &x : v) x = u(rng);
    bf16_tensor(name, {n}, v);
  };
  // Block scales that give values of about 1/sqrt(k): Q4_K's d * sc * q spans
  // ~63 * 15 d, and its dmin = 7.5 d centres it (Q5_K: ~63 * 31 d, 15.5 d);
  // Q6_K's d * sc * (q - 32) spans ~128 * 32 d.
  auto matrix_of = [&](const std::string &name, int64_t n, int64_t k, const char *which) {
    const QuantFormat f = format_for(which);
    const float unit = 1.0f / std::sqrt(static_cast<float>(k));
    if (f == QuantFormat::kF8) {  // codes below 2 in magnitude, scales of about unit
      Fp8Matrix h = random_fp8(n, k, rng, 0.5f * unit, unit);
      for (size_t i = 0; i < h.codes.size(); ++i) {
        h.codes[i] &= 0xbf;
        h.values[i] = fp8_e4m3_to_f32(h.codes[i]) * h.scales[i / kernels::kF8Group];
      }
      auto kept = std::make_shared<Fp8Matrix>(std::move(h));
      bf16_tensor(name, {n, k}, kept->values);
      quantized[name].fp8 = kept->codes.data();
      quantized[name].fp8_scales = kept->scales.data();
      owners.push_back(kept);
      return;
    }
    const bool q5 = f == QuantFormat::kQ5_K;
    const float d = f == QuantFormat::kQ4_K ? unit / 300 : q5 ? unit / 600 : unit / 1500;
    auto raw = std::make_shared<std::vector<uint8_t>>(random_blocks(f, n, k, rng, d, d));
    if (f == QuantFormat::kQ4_K || q5)
      for (size_t b = 0; b < raw->size(); b += q5 ? 176 : 144) {
        const uint16_t dmin = f32_to_f16((q5 ? 15.5f : 7.5f) * d);
        std::memcpy(&(*raw)[b + 2], &dmin, 2);
      }
    std::vector<float> values(static_cast<size_t>(n * k));
    gguf::dequantize(ggml_type_of(f), raw->data(), n * k, values.data());
    bf16_tensor(name, {n, k}, values);
    quantized[name].ggml_blocks = raw->data();
    quantized[name].ggml_type = ggml_type_of(f);
    owners.push_back(raw);
  };
  const int64_t h = config.hidden_size, inter = config.intermediate_size;
  const int64_t q = config.q_dim(), kv = config.kv_dim(), vocab = config.vocab_size;
  {
    std::normal_distribution<float> normal;
    std::vector<float> embed(static_cast<size_t>(vocab * h));
    for (float &x : embed) x = normal(rng);
    bf16_tensor("model.embed_tokens.weight", {vocab, h}, embed);
  }
  vector_of("model.norm.weight", h, 1.0f, 0.1f);
  matrix_of("lm_head.weight", vocab, h, "head");
  for (int l = 0; l < config.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    vector_of(p + "input_layernorm.weight", h, 1.0f, 0.1f);
    vector_of(p + "post_attention_layernorm.weight", h, 1.0f, 0.1f);
    vector_of(p + "self_attn.q_norm.weight", config.head_dim, 1.0f, 0.1f);
    vector_of(p + "self_attn.k_norm.weight", config.head_dim, 1.0f, 0.1f);
    matrix_of(p + "self_attn.q_proj.weight", q, h, "q");
    matrix_of(p + "self_attn.k_proj.weight", kv, h, "k");
    matrix_of(p + "self_attn.v_proj.weight", kv, h, "v");
    matrix_of(p + "self_attn.o_proj.weight", h, q, "o");
    matrix_of(p + "mlp.gate_proj.weight", inter, h, "gate");
    matrix_of(p + "mlp.up_proj.weight", inter, h, "up");
    matrix_of(p + "mlp.down_proj.weight", h, inter, "down");
  }
  for (auto &[name, t] : plain) {
    t.ggml_blocks = nullptr;
    t.fp8 = nullptr;
    t.fp8_scales = nullptr;
  }
  auto make_cuda = [](const ModelConfig &c, const ModelWeights &w) {
    return create_cuda_backend(c, w, CudaBackendOptions{});
  };
  golden::GoldenModel a(config, WeightStore::adopt(quantized, owners, label), 128, 64, false,
                        make_cuda);
  golden::GoldenModel b(config, WeightStore::adopt(plain, owners, "bf16"), 128, 64, false,
                        make_cuda);
  // Kept quantized: the bf16 embedding is in both.
  const double embed_bytes = 2.0 * double(vocab) * double(h);
  EXPECT_LT(double(a.backend().weight_bytes()) - embed_bytes,
            bytes_ratio * (double(b.backend().weight_bytes()) - embed_bytes));
  auto compare = [&](const float *x, const float *y, size_t rows, const char *what) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < rows * static_cast<size_t>(vocab); ++i) {
      err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
      ref += double(y[i]) * y[i];
    }
    EXPECT_LT(std::sqrt(err / ref), 1e-2) << what;
    EXPECT_GT(ref, 0.0) << what;
    std::cout << "[quant] " << label << ", " << what << ": relative L2 " << std::sqrt(err / ref)
              << "\n";
  };
  std::vector<int32_t> prompt(64);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919 + 13) % vocab);
  const float *la = a.forward(prompt.data(), 64, SeqRows::Logits::kAll);
  std::vector<float> pa(la, la + 64 * vocab);
  const float *lb = b.forward(prompt.data(), 64, SeqRows::Logits::kAll);
  compare(pa.data(), lb, 64, "64-row prefill");
  std::vector<float> da, db;
  int32_t token = prompt.back();
  for (int step = 0; step < 16; ++step) {
    token = (token * 31 + 7) % static_cast<int32_t>(vocab);
    const float *sa = a.forward(&token, 1, SeqRows::Logits::kLast);
    da.insert(da.end(), sa, sa + vocab);
    const float *sb = b.forward(&token, 1, SeqRows::Logits::kLast);
    db.insert(db.end(), sb, sb + vocab);
  }
  compare(da.data(), db.data(), 16, "single-row steps");
  std::vector<float> va, vb;  // five rows a step: F8 on the tensor cores, fused SwiGLU
  for (int step = 0; step < 4; ++step) {
    int32_t rows[5];
    for (int32_t &t : rows) t = token = (token * 31 + 7) % static_cast<int32_t>(vocab);
    const float *sa = a.forward(rows, 5, SeqRows::Logits::kAll);
    va.insert(va.end(), sa, sa + 5 * vocab);
    const float *sb = b.forward(rows, 5, SeqRows::Logits::kAll);
    vb.insert(vb.end(), sb, sb + 5 * vocab);
  }
  compare(va.data(), vb.data(), 20, "five-row steps");
}

// Proves the Q4_K_M-like mix: q, k, o, gate and up in Q4_K, v, down and the
// (untied) head in Q6_K, so that the qkv projection is two row ranges in two
// formats writing one output; ~4.5-6.6 bits a value instead of 16.
TEST(CudaQuantModel, KQuantMixTracksItsBf16Values) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  check_model_tracks_bf16(
      "k-quant mix",
      [](const std::string &m) {
        return m == "v" || m == "down" || m == "head" ? QuantFormat::kQ6_K : QuantFormat::kQ4_K;
      },
      0.45);
}

// The Q5_K_M-like mix: the same with Q5_K for Q4_K (~5.5-6.6 bits a value).
TEST(CudaQuantModel, Q5KMixTracksItsBf16Values) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  check_model_tracks_bf16(
      "q5_k mix",
      [](const std::string &m) {
        return m == "v" || m == "down" || m == "head" ? QuantFormat::kQ6_K : QuantFormat::kQ5_K;
      },
      0.45);
}

// Proves every matrix kept as FP8 codes with a scale per 128 values (8.25
// bits a value) computes what its values as bf16 compute.
TEST(CudaQuantModel, Fp8MatricesTrackTheirBf16Values) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  check_model_tracks_bf16(
      "fp8", [](const std::string &) { return QuantFormat::kF8; }, 0.55);
}

}  // namespace
}  // namespace vegas
