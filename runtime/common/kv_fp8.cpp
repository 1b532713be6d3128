#include "common/kv_fp8.h"

#include <algorithm>
#include <cmath>

namespace vegas {

int fp8_scale_exponent(float amax) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 0;
  int k = 0;
  const float m = std::frexp(amax, &k);  // amax = m 2^k, m in [0.5, 1); 448 = 0.875 2^9
  const int e = k - 9 + (m > 0.875f ? 1 : 0);
  return std::clamp(e, -kFp8MaxExponent, kFp8MaxExponent);
}

float round_to_e4m3(float x) {
  if (std::isnan(x)) return x;
  const float a = std::fabs(x);
  if (a >= kFp8E4m3Max) return std::copysign(kFp8E4m3Max, x);
  // The spacing of e4m3 numbers around a: 2^-9 among the subnormals (below
  // 2^-6), else 2^(exponent - 3) for 3 mantissa bits.
  int k = 0;
  std::frexp(a, &k);  // a in [2^(k-1), 2^k)
  const int quantum_exp = a < 0x1p-6f ? -9 : (k - 1) - 3;
  // nearbyint rounds ties to even in the default rounding mode; scaling by a
  // power of two is exact, so this is the correctly rounded value.
  const float r = std::ldexp(std::nearbyint(std::ldexp(a, -quantum_exp)), quantum_exp);
  return std::copysign(std::min(r, kFp8E4m3Max), x);
}

uint8_t encode_e4m3(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return 0x7f;
  const float a = std::fabs(x);
  if (a < 0x1p-6f)  // subnormal: a = m 2^-9
    return sign | static_cast<uint8_t>(std::lrint(std::ldexp(a, 9)));
  int k = 0;
  const float m = std::frexp(a, &k);  // a = (2 m) 2^(k-1), 2 m in [1, 2)
  const int mantissa = static_cast<int>(std::lrint((2.0f * m - 1.0f) * 8.0f));
  return sign | static_cast<uint8_t>(((k - 1 + 7) << 3) | mantissa);
}

float decode_e4m3(uint8_t code) {
  const float sign = code & 0x80 ? -1.0f : 1.0f;
  const int exponent = (code >> 3) & 0xf, mantissa = code & 7;
  if (exponent == 0xf && mantissa == 7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
}

void round_head_to_fp8(float *x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const int e = fp8_scale_exponent(amax);
  for (int64_t i = 0; i < n; ++i) x[i] = std::ldexp(round_to_e4m3(std::ldexp(x[i], -e)), e);
}

}  // namespace vegas
