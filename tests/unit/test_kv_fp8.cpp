// The fp8 KV cache's host-side values (common/kv_fp8.h), which the CPU backend
// stores and the GPU tests check the CUDA kernels against: every e4m3 code
// decodes and re-encodes to itself, rounding is to the nearest e4m3 number with
// ties to even and saturates at 448, and a head's scale is the smallest power
// of two that keeps its largest magnitude within 448.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/kv_fp8.h"

namespace vegas {
namespace {

TEST(KvFp8, EveryCodeRoundTrips) {
  int finite = 0;
  for (int code = 0; code < 256; ++code) {
    const float x = decode_e4m3(static_cast<uint8_t>(code));
    if (std::isnan(x)) {
      EXPECT_TRUE(code == 0x7f || code == 0xff) << code;
      continue;
    }
    ++finite;
    EXPECT_EQ(round_to_e4m3(x), x) << "code " << code << " is not an e4m3 number: " << x;
    if (x != 0.0f || !std::signbit(x)) {
      EXPECT_EQ(encode_e4m3(x), code) << x;
    }
  }
  EXPECT_EQ(finite, 254);
  EXPECT_EQ(decode_e4m3(0x7e), 448.0f);   // the largest finite value
  EXPECT_EQ(decode_e4m3(0x01), 0x1p-9f);  // the smallest subnormal
  EXPECT_EQ(decode_e4m3(0x08), 0x1p-6f);  // the smallest normal
}

TEST(KvFp8, RoundsToNearestTiesToEvenAndSaturates) {
  EXPECT_EQ(round_to_e4m3(1.0625f), 1.0f);   // halfway 1 / 1.125: even mantissa 0
  EXPECT_EQ(round_to_e4m3(1.1875f), 1.25f);  // halfway 1.125 / 1.25: even mantissa 2
  EXPECT_EQ(round_to_e4m3(1.07f), 1.125f);   // above the halfway point
  EXPECT_EQ(round_to_e4m3(-3.3f), -3.25f);
  EXPECT_EQ(round_to_e4m3(0x1.8p-10f), 0x1p-9f);  // nearer the smallest subnormal than 0
  EXPECT_EQ(round_to_e4m3(0x1p-10f), 0.0f);       // halfway 0 / 2^-9: even (0)
  EXPECT_EQ(round_to_e4m3(0x1p-11f), 0.0f);
  EXPECT_EQ(round_to_e4m3(0x1.8p-9f), 0x1p-8f);  // halfway 2^-9 / 2^-8: even (2 x 2^-9)
  EXPECT_EQ(round_to_e4m3(500.0f), 448.0f);
  EXPECT_EQ(round_to_e4m3(-1e9f), -448.0f);
  EXPECT_EQ(round_to_e4m3(std::numeric_limits<float>::infinity()), 448.0f);
  EXPECT_TRUE(std::isnan(round_to_e4m3(std::nanf(""))));
  // Every float in a range lands on the nearer of its two e4m3 neighbours.
  std::vector<float> codes;
  for (int c = 0; c < 0x7f; ++c) codes.push_back(decode_e4m3(static_cast<uint8_t>(c)));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.0f, 448.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = i % 2 ? u(rng) : std::ldexp(u(rng), -12);
    const float r = round_to_e4m3(x);
    float best = codes[0];
    for (float c : codes)
      if (std::fabs(c - x) < std::fabs(best - x)) best = c;
    EXPECT_EQ(std::fabs(r - x), std::fabs(best - x)) << x;
  }
}

TEST(KvFp8, ScaleIsTheSmallestPowerOfTwoThatFits) {
  EXPECT_EQ(fp8_scale_exponent(448.0f), 0);
  EXPECT_EQ(fp8_scale_exponent(448.001f), 1);
  EXPECT_EQ(fp8_scale_exponent(224.0f), -1);
  EXPECT_EQ(fp8_scale_exponent(1.0f), -8);  // 1 / 2^-8 = 256 <= 448 < 512
  EXPECT_EQ(fp8_scale_exponent(0.0f), 0);
  EXPECT_EQ(fp8_scale_exponent(std::numeric_limits<float>::infinity()), 0);
  EXPECT_EQ(fp8_scale_exponent(1e-38f), -kFp8MaxExponent);
  EXPECT_EQ(fp8_scale_exponent(1e38f), kFp8MaxExponent);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> e(-30.0f, 30.0f);
  for (int i = 0; i < 10000; ++i) {
    const float amax = std::exp2(e(rng));
    const int k = fp8_scale_exponent(amax);
    EXPECT_LE(amax, std::ldexp(448.0f, k)) << amax;
    EXPECT_GT(amax, std::ldexp(448.0f, k - 1)) << amax;
  }
}

TEST(KvFp8, HeadRoundingKeepsRelativeErrorWithinHalfAStep) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float magnitude : {1e-6f, 0.01f, 1.0f, 37.0f, 5000.0f}) {
    std::vector<float> head(128), orig(128);
    for (size_t i = 0; i < head.size(); ++i) orig[i] = head[i] = magnitude * n(rng);
    round_head_to_fp8(head.data(), static_cast<int64_t>(head.size()));
    float amax = 0.0f;
    for (float x : orig) amax = std::max(amax, std::fabs(x));
    const float scale = std::ldexp(1.0f, fp8_scale_exponent(amax));
    for (size_t i = 0; i < head.size(); ++i) {
      // Normal e4m3 numbers: half a step is 2^-4 relative; subnormals: 2^-10 absolute.
      EXPECT_LE(std::fabs(head[i] - orig[i]),
                std::max(std::fabs(orig[i]) * 0x1p-4f, scale * 0x1p-10f) * 1.0001f)
          << magnitude << " " << orig[i];
      EXPECT_EQ(round_to_e4m3(head[i] / scale) * scale, head[i]) << "not on the fp8 grid";
    }
  }
  std::vector<float> zeros(64, 0.0f);
  round_head_to_fp8(zeros.data(), 64);
  for (float z : zeros) EXPECT_EQ(z, 0.0f);
}

}  // namespace
}  // namespace vegas
