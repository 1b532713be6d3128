#include "gguf/ggml_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/bf16.h"
#include "common/error.h"
#include "gguf/ggml_types.h"

namespace vegas::gguf {

namespace {

constexpr int kBlock = 32;

void put_f16(uint8_t *p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, sizeof h);
}

// Q8_0: d = max |x| / 127, q = round(x / d).
void q8_0_block(const float *x, uint8_t *out) {
  float amax = 0.0f;
  for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(out, d);
  for (int j = 0; j < kBlock; ++j)
    out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
}

// Q4_0: d = -m / 8 for the value m of largest magnitude, q = x / d + 8 in
// 0..15; values j and j + 16 share byte j (low, high nibble).
void q4_0_block(const float *x, uint8_t *out) {
  float amax = 0.0f, m = 0.0f;
  for (int j = 0; j < kBlock; ++j)
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      m = x[j];
    }
  const float d = m / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(out, d);
  auto level = [&](float v) {
    return static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(v * id + 8.5f))));
  };
  for (int j = 0; j < kBlock / 2; ++j)
    out[2 + j] = static_cast<uint8_t>(level(x[j]) | (level(x[j + kBlock / 2]) << 4));
}

float f16_rounded(float v) {
  return f16_to_f32(f32_to_f16(v));
}

// Q4_K (BITS 4) and Q5_K (BITS 5): 256 values in 8 sub-blocks of 32, each
// x = (d sc) q - (dmin m) with q in 0..2^BITS - 1 and 6-bit sc, m. Each
// sub-block's step is its range / (2^BITS - 1) and its offset its minimum (0
// when every value is positive); d and dmin are the largest of them / 63,
// stored as fp16, and sc, m, q are rounded against the stored values. The 12
// scale bytes pack sc and m as ggml_types.cpp's k_scale_min unpacks them; the
// low 4 bits of q go to nibbles (chunk c: sub-block 2c low, 2c + 1 high), and
// Q5_K's fifth bit of value 32 j + l to bit j of qh[l].
template <int BITS>
void k_block(const float *x, uint8_t *out) {
  constexpr int kSub = 32, kTop = (1 << BITS) - 1;
  constexpr float kLevels = static_cast<float>(kTop);
  float step[8], offset[8];
  for (int j = 0; j < 8; ++j) {
    float lo = x[kSub * j], hi = lo;
    for (int l = 1; l < kSub; ++l) {
      lo = std::min(lo, x[kSub * j + l]);
      hi = std::max(hi, x[kSub * j + l]);
    }
    lo = std::min(lo, 0.0f);
    step[j] = (hi - lo) / kLevels;
    offset[j] = -lo;
  }
  const float d = f16_rounded(*std::max_element(step, step + 8) / 63.0f);
  const float dmin = f16_rounded(*std::max_element(offset, offset + 8) / 63.0f);
  put_f16(out, d);
  put_f16(out + 2, dmin);
  int sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = d > 0.0f ? std::min(63, static_cast<int>(std::lround(step[j] / d))) : 0;
    m[j] = dmin > 0.0f ? std::min(63, static_cast<int>(std::lround(offset[j] / dmin))) : 0;
  }
  uint8_t *s = out + 4;
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
  uint8_t *qh = out + 16, *qs = BITS == 5 ? out + 48 : out + 16;
  if (BITS == 5) std::memset(qh, 0, kSub);
  for (int j = 0; j < 8; ++j) {
    const float d1 = d * static_cast<float>(sc[j]), m1 = dmin * static_cast<float>(m[j]);
    for (int l = 0; l < kSub; ++l) {
      const int q =
          d1 > 0.0f
              ? std::clamp(static_cast<int>(std::lround((x[kSub * j + l] + m1) / d1)), 0, kTop)
              : 0;
      uint8_t &byte = qs[kSub * (j / 2) + l];
      byte = static_cast<uint8_t>(j % 2 == 0 ? (q & 15) : byte | ((q & 15) << 4));
      if (BITS == 5) qh[l] = static_cast<uint8_t>(qh[l] | ((q >> 4) << j));
    }
  }
}

// Q6_K: 256 values in 16 sub-blocks of 16, each x = (d sc) (q - 32) with q
// in 0..63 and an int8 sc. Each sub-block's step is its largest magnitude /
// 31; d is the largest step / 127, stored as fp16, and sc, q are rounded
// against the stored value. ql holds the low 4 bits and qh the top 2 as
// ggml_types.cpp's dequant_q6_k unpacks them; the scales, then d, follow.
void q6_k_block(const float *x, uint8_t *out) {
  constexpr int kSub = 16;
  float step[16];
  for (int j = 0; j < 16; ++j) {
    float amax = 0.0f;
    for (int l = 0; l < kSub; ++l) amax = std::max(amax, std::fabs(x[kSub * j + l]));
    step[j] = amax / 31.0f;
  }
  const float d = f16_rounded(*std::max_element(step, step + 16) / 127.0f);
  uint8_t *ql = out, *qh = out + 128;
  int8_t *scales = reinterpret_cast<int8_t *>(out + 192);
  std::memset(out, 0, 192);
  for (int j = 0; j < 16; ++j) {
    const int sc = d > 0.0f ? std::min(127, static_cast<int>(std::lround(step[j] / d))) : 0;
    scales[j] = static_cast<int8_t>(sc);
    const float ds = d * static_cast<float>(sc);
    for (int l = 0; l < kSub; ++l) {
      const int i = kSub * j + l, h = i / 128, r = i % 128;
      const int q =
          ds > 0.0f ? std::clamp(static_cast<int>(std::lround(x[i] / ds)), -32, 31) + 32 : 32;
      ql[64 * h + r % 64] |= static_cast<uint8_t>((q & 0x0f) << (4 * (r / 64)));
      qh[32 * h + r % 32] |= static_cast<uint8_t>((q >> 4) << (2 * (r / 32)));
    }
  }
  put_f16(out + 208, d);
}

}  // namespace

bool quantizable(uint32_t type) {
  return type == kGgmlF32 || type == kGgmlF16 || type == kGgmlBF16 || type == kGgmlQ8_0 ||
         type == kGgmlQ4_0 || type == kGgmlQ4_K || type == kGgmlQ5_K || type == kGgmlQ6_K;
}

std::vector<uint8_t> quantize(uint32_t type, const float *x, int64_t n) {
  const GgmlTypeInfo *info = ggml_type_info(type);
  if (info == nullptr || !quantizable(type) || n < 0 || n % info->block_elems != 0)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "quantize: cannot write " + std::to_string(n) +
                                         " values as GGML type " + std::to_string(type));
  std::vector<uint8_t> out(static_cast<size_t>(n / info->block_elems * info->block_bytes));
  uint8_t *o = out.data();
  for (int64_t i = 0; i < n; i += info->block_elems, o += info->block_bytes) {
    switch (type) {
      case kGgmlF32:
        std::memcpy(o, x + i, sizeof(float));
        break;
      case kGgmlF16:
        put_f16(o, x[i]);
        break;
      case kGgmlBF16: {
        const uint16_t b = f32_to_bf16(x[i]);
        std::memcpy(o, &b, sizeof b);
        break;
      }
      case kGgmlQ8_0:
        q8_0_block(x + i, o);
        break;
      case kGgmlQ4_K:
        k_block<4>(x + i, o);
        break;
      case kGgmlQ5_K:
        k_block<5>(x + i, o);
        break;
      case kGgmlQ6_K:
        q6_k_block(x + i, o);
        break;
      default:
        q4_0_block(x + i, o);
        break;
    }
  }
  return out;
}

}  // namespace vegas::gguf
