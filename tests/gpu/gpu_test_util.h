// Helpers shared by the GPU tests: device buffers of host vectors, bf16
// rounding, seeded random data, the relative L2 error and launch timing.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/bf16.h"
#include "common/kv_fp8.h"

namespace vegas::test {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

// A device copy of a host vector; download() reads it back.
template <typename T>
class Dev {
 public:
  explicit Dev(const std::vector<T> &host) : n_(host.size()) {
    cudaMalloc(&p_, n_ * sizeof(T) + 16);
    cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice);
  }
  explicit Dev(size_t n, uint8_t fill_byte = 0xff) : n_(n) {  // 0xff..: NaN poison for floats/bf16
    cudaMalloc(&p_, n_ * sizeof(T) + 16);
    cudaMemset(p_, fill_byte, n_ * sizeof(T));
  }
  ~Dev() { cudaFree(p_); }
  Dev(const Dev &) = delete;
  Dev &operator=(const Dev &) = delete;
  T *get() const { return static_cast<T *>(p_); }
  template <typename U = T>
  U *as() const {
    return static_cast<U *>(p_);
  }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }

 private:
  void *p_ = nullptr;
  size_t n_;
};

// A cache of heads of head_dim bf16 values as the fp8 KV cache stores it
// (kernels/kv_fp8.cuh): e4m3 codes, one power-of-two scale per head, and the
// bf16 values they stand for (exact: code value times scale).
struct Fp8Cache {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  std::vector<uint16_t> values;
};
inline Fp8Cache to_fp8_cache(const std::vector<uint16_t> &cache, int head_dim) {
  Fp8Cache c;
  c.codes.resize(cache.size());
  c.values.resize(cache.size());
  std::vector<float> head(static_cast<size_t>(head_dim));
  for (size_t h0 = 0; h0 < cache.size(); h0 += size_t(head_dim)) {
    float amax = 0.0f;
    for (int d = 0; d < head_dim; ++d)
      amax = std::max(amax, std::fabs(head[size_t(d)] = bf16_to_f32(cache[h0 + size_t(d)])));
    const int e = fp8_scale_exponent(amax);
    c.scales.push_back(std::ldexp(1.0f, e));
    for (int d = 0; d < head_dim; ++d) {
      const float r = round_to_e4m3(std::ldexp(head[size_t(d)], -e));
      c.codes[h0 + size_t(d)] = encode_e4m3(r);
      c.values[h0 + size_t(d)] = f32_to_bf16(std::ldexp(r, e));
    }
  }
  return c;
}

// fp8 caches on the device made from bf16 ones (to_fp8_cache): make()
// replaces the host's K and V by the values the codes stand for (the
// references then use those) and uploads the codes and scales.
struct Fp8DeviceCache {
  std::unique_ptr<Dev<uint8_t>> k, v;
  std::unique_ptr<Dev<float>> k_scale, v_scale;
  void make(std::vector<uint16_t> &kh, std::vector<uint16_t> &vh, int head_dim) {
    const Fp8Cache kc = to_fp8_cache(kh, head_dim), vc = to_fp8_cache(vh, head_dim);
    kh = kc.values;
    vh = vc.values;
    k = std::make_unique<Dev<uint8_t>>(kc.codes);
    v = std::make_unique<Dev<uint8_t>>(vc.codes);
    k_scale = std::make_unique<Dev<float>>(kc.scales);
    v_scale = std::make_unique<Dev<float>>(vc.scales);
  }
};

// n bf16 values uniform in [-scale, scale), and their exact float values.
inline std::vector<uint16_t> random_bf16(size_t n, std::mt19937 &rng, float scale = 1.0f,
                                         float offset = 0.0f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<uint16_t> v(n);
  for (auto &x : v) x = f32_to_bf16(offset + u(rng));
  return v;
}

inline std::vector<double> to_double(const std::vector<uint16_t> &v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = bf16_to_f32(v[i]);
  return d;
}

// ||got - ref|| / ||ref||; infinite if any value is not finite.
template <typename G>
double rel_l2(const std::vector<G> &got, const std::vector<double> &ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    if (!std::isfinite(g)) return INFINITY;
    num += (g - ref[i]) * (g - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

// fp16 (the captured scores' format): bits of x rounded to nearest, and back.
inline uint16_t f16_bits(float x) {
  const __half_raw r = __half(x);
  return r.x;
}
inline float f16_value(uint16_t bits) {
  __half_raw r;
  r.x = bits;
  return __half2float(__half(r));
}
// The poisoned fp16 word (0xffff, a NaN) reads as the poisoned float (all ones).
inline std::vector<float> f16_vec_to_float(const std::vector<uint16_t> &v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == 0xffff) {
      uint32_t ones = 0xffffffffu;
      std::memcpy(&out[i], &ones, sizeof ones);
    } else {
      out[i] = f16_value(v[i]);
    }
  }
  return out;
}
inline std::vector<uint16_t> f16_vec_bits(const std::vector<float> &v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f16_bits(v[i]);
  return out;
}

inline std::vector<float> bf16_vec_to_float(const std::vector<uint16_t> &v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = bf16_to_f32(v[i]);
  return f;
}

inline bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Timing tests: the median device time in microseconds of `launch` (a call
// returning cudaError_t), each of `reps` runs between two events after
// `warmup` unmeasured ones; -1 when a launch fails.
template <typename Launch>
double median_launch_us(Launch &&launch, int reps = 20, int warmup = 3) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> us;
  bool failed = false;
  for (int it = 0; it < warmup + reps && !failed; ++it) {
    cudaEventRecord(a);
    failed = launch() != cudaSuccess;
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    if (it >= warmup) us.push_back(1e3f * ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (failed || us.empty()) return -1.0;
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// median_launch_us in milliseconds; a failed launch fails the test.
template <typename Launch>
double median_launch_ms(Launch &&launch) {
  const double us = median_launch_us(launch);
  EXPECT_GE(us, 0.0) << "a timed launch failed";
  return us / 1e3;
}

}  // namespace vegas::test
