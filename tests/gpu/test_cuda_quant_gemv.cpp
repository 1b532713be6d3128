// Quantized weights on the GPU (label `gpu`): kernels::quant_gemv and
// quant_dequantize against the host's GGUF dequantization of the same Q8_0 /
// Q4_0 blocks, and a model whose matrices are kept quantized against the
// same model with those values as bf16.
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
#include "quant_gemv.cuh"

namespace vegas {
namespace {

using kernels::QuantFormat;

bool have_gpu() {
  return cuda_device_count() > 0;
}

uint16_t f32_to_f16(float x) {
  const __half h = __float2half(x);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

uint32_t ggml_type_of(QuantFormat f) {
  return f == QuantFormat::kQ8_0 ? gguf::kGgmlQ8_0 : gguf::kGgmlQ4_0;
}

// n rows of k values as GGML blocks: random values, scales in [2^-8, 2^-3].
std::vector<uint8_t> random_blocks(QuantFormat f, int64_t n, int64_t k, std::mt19937 &rng) {
  const gguf::GgmlTypeInfo &info = *gguf::ggml_type_info(ggml_type_of(f));
  std::vector<uint8_t> raw(static_cast<size_t>(n * k / 32 * info.block_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(1.0f / 256, 1.0f / 8);
  for (size_t b = 0; b < raw.size(); b += static_cast<size_t>(info.block_bytes)) {
    const uint16_t d = f32_to_f16(scale(rng));
    std::memcpy(&raw[b], &d, 2);
    for (int i = 2; i < info.block_bytes; ++i) raw[b + static_cast<size_t>(i)] = uint8_t(byte(rng));
  }
  return raw;
}

struct DeviceQuantMatrix {
  cuda::DeviceBuffer qs, scales;
  kernels::QuantMatrix m;
};

DeviceQuantMatrix upload(QuantFormat f, const std::vector<uint8_t> &raw, int64_t n, int64_t k) {
  std::vector<uint8_t> qs(static_cast<size_t>(n * kernels::quant_row_bytes(f, k)));
  std::vector<uint16_t> scales(static_cast<size_t>(n * k / 32));
  gguf::split_ggml_blocks(ggml_type_of(f), raw.data(), n, k, qs.data(), scales.data());
  DeviceQuantMatrix d;
  d.qs.allocate(qs.size(), "test");
  d.scales.allocate(scales.size() * 2, "test");
  cudaMemcpy(d.qs.get(), qs.data(), qs.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(d.scales.get(), scales.data(), scales.size() * 2, cudaMemcpyHostToDevice);
  d.m.format = f;
  d.m.qs = d.qs.get<uint8_t>();
  d.m.scales = d.scales.get<kernels::f16>();
  d.m.n = static_cast<int32_t>(n);
  d.m.k = static_cast<int32_t>(k);
  return d;
}

// Proves quant_gemv computes x · Wᵀ for both formats, 1, 3 and 8 input rows,
// output rows that leave a block's warps idle, K over one staged chunk with a
// last chunk of one warp step, and each epilogue
// (f32 stored or added to, bf16), against f64 sums over the host's
// dequantization of the same blocks (gguf::dequantize).
TEST(CudaQuantGemv, MatchesHostReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (const QuantFormat f : {QuantFormat::kQ8_0, QuantFormat::kQ4_0})
    for (const auto &[n, k] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 1024}, {37, 3072}, {300, 5120}})
      for (const int m : {1, 3, 8}) {
        const std::vector<uint8_t> raw = random_blocks(f, n, k, rng);
        std::vector<float> w(static_cast<size_t>(n * k));
        gguf::dequantize(ggml_type_of(f), raw.data(), n * k, w.data());
        std::vector<uint16_t> x(static_cast<size_t>(m * k));
        for (uint16_t &v : x) v = f32_to_bf16(normal(rng));
        std::vector<float> y0(static_cast<size_t>(m * n));
        for (float &v : y0) v = normal(rng);
        DeviceQuantMatrix d = upload(f, raw, n, k);
        cuda::DeviceBuffer xd, yd;
        xd.allocate(x.size() * 2, "test");
        yd.allocate(y0.size() * 4, "test");
        cudaMemcpy(xd.get(), x.data(), x.size() * 2, cudaMemcpyHostToDevice);
        for (int epilogue = 0; epilogue < 3; ++epilogue) {  // f32 store, f32 add, bf16
          cudaMemcpy(yd.get(), y0.data(), y0.size() * 4, cudaMemcpyHostToDevice);
          kernels::QuantGemvParams p;
          p.w = d.m;
          p.x = xd.get<kernels::bf16>();
          p.m = m;
          if (epilogue < 2)
            p.y_f32 = yd.get<float>();
          else
            p.y_bf16 = yd.get<kernels::bf16>();
          p.accumulate = epilogue == 1;
          ASSERT_EQ(kernels::quant_gemv(p, nullptr), cudaSuccess);
          std::vector<float> y(y0.size());
          std::vector<uint16_t> yb(y0.size());
          if (epilogue < 2)
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
              const size_t at = static_cast<size_t>(r * n + o);
              if (epilogue == 1) ref += y0[at];
              const double got = epilogue < 2 ? y[at] : bf16_to_f32(yb[at]);
              const double tol =
                  epilogue < 2 ? 1e-5 * mag + 1e-6 : 4e-3 * std::fabs(ref) + 1e-5 * mag;
              ASSERT_NEAR(got, ref, tol)
                  << "format " << int(f) << " n " << n << " k " << k << " m " << m << " epilogue "
                  << epilogue << " row " << r << " out " << o;
            }
        }
      }
}

// Proves quant_dequantize writes bf16(scale * q) of every value, bit for bit
// the host's dequantization rounded to bf16.
TEST(CudaQuantDequantize, BitExact) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(11);
  for (const QuantFormat f : {QuantFormat::kQ8_0, QuantFormat::kQ4_0}) {
    const int64_t n = 129, k = 512;
    const std::vector<uint8_t> raw = random_blocks(f, n, k, rng);
    std::vector<float> w(static_cast<size_t>(n * k));
    gguf::dequantize(ggml_type_of(f), raw.data(), n * k, w.data());
    DeviceQuantMatrix d = upload(f, raw, n, k);
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
// of 96 rows (the dequantize + cuBLASLt path) and 24 single-row steps
// (quant_gemv), logits within bf16 weight rounding, the same top token.
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
}

}  // namespace
}  // namespace vegas
