// f16_rows_to_f32 (common/half_rows.h), the bulk conversion of downloaded
// score captures, against bf16.h's one-value conversion: every one of the
// 65,536 halves, at every start offset and length around the eight-wide
// steps (the F16C path's tail and unaligned loads), bit for bit except NaNs,
// which must stay NaN of the same sign.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/bf16.h"
#include "common/half_rows.h"

namespace vegas {
namespace {

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// The number of values of got[0, n) that differ from the one-value conversion of from.
int64_t mismatches(const uint16_t *from, const float *got, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float want = f16_to_f32(from[i]);
    const bool same = std::isnan(want)
                          ? std::isnan(got[i]) && std::signbit(got[i]) == std::signbit(want)
                          : bits_of(got[i]) == bits_of(want);
    bad += same ? 0 : 1;
  }
  return bad;
}

TEST(HalfRows, EveryHalfConvertsAsTheOneValueConversion) {
  std::printf("[half-rows] F16C path: %s\n", f16_rows_use_f16c() ? "yes" : "no (one at a time)");
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> out(all.size(), -1.0f);
  f16_rows_to_f32(all.data(), out.data(), static_cast<int64_t>(all.size()));
  EXPECT_EQ(mismatches(all.data(), out.data(), static_cast<int64_t>(all.size())), 0);
  // Subnormals, zeros, infinities and the largest values, spot-checked by value.
  EXPECT_EQ(out[0x0001], std::ldexp(1.0f, -24));
  EXPECT_EQ(out[0x8000], -0.0f);
  EXPECT_TRUE(std::signbit(out[0x8000]));
  EXPECT_EQ(out[0x7bff], 65504.0f);
  EXPECT_EQ(out[0x7c00], INFINITY);
  EXPECT_EQ(out[0xfc00], -INFINITY);
  EXPECT_TRUE(std::isnan(out[0x7e00]));
}

TEST(HalfRows, OffsetsAndLengthsAroundTheEightWideSteps) {
  std::vector<uint16_t> from(64);
  for (size_t i = 0; i < from.size(); ++i) from[i] = static_cast<uint16_t>(0x3c00 + 37 * i);
  for (int64_t start = 0; start < 9; ++start)
    for (int64_t n = 0; n <= 40; ++n) {
      std::vector<float> out(64, -7.0f);  // poison: nothing past n may be written
      f16_rows_to_f32(from.data() + start, out.data(), n);
      ASSERT_EQ(mismatches(from.data() + start, out.data(), n), 0) << start << " " << n;
      for (size_t i = static_cast<size_t>(n); i < out.size(); ++i)
        ASSERT_EQ(out[i], -7.0f) << "wrote past n: start " << start << ", n " << n;
    }
}

}  // namespace
}  // namespace vegas
