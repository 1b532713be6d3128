#include "gguf/ggml_types.h"

#include <cstring>
#include <string>

#include "common/bf16.h"
#include "common/error.h"

namespace vegas::gguf {

namespace {

// Every type id gguf-py's GGML_QUANT_SIZES lists (gguf 0.19). Ids 4, 5 (Q4_2,
// Q4_3), 31..33 (Q4_0_4_4 ...) and 36..38 (IQ4_NL_4_4 ...) were removed from
// GGML and are unknown here.
struct TypeRow {
  uint32_t id;
  GgmlTypeInfo info;
};

constexpr TypeRow kTypes[] = {
    {0, {"F32", 1, 4, true}},          {1, {"F16", 1, 2, true}},
    {2, {"Q4_0", 32, 18, true}},       {3, {"Q4_1", 32, 20, true}},
    {6, {"Q5_0", 32, 22, true}},       {7, {"Q5_1", 32, 24, true}},
    {8, {"Q8_0", 32, 34, true}},       {9, {"Q8_1", 32, 40, false}},
    {10, {"Q2_K", 256, 84, false}},    {11, {"Q3_K", 256, 110, false}},
    {12, {"Q4_K", 256, 144, true}},    {13, {"Q5_K", 256, 176, true}},
    {14, {"Q6_K", 256, 210, true}},    {15, {"Q8_K", 256, 292, false}},
    {16, {"IQ2_XXS", 256, 66, false}}, {17, {"IQ2_XS", 256, 74, false}},
    {18, {"IQ3_XXS", 256, 98, false}}, {19, {"IQ1_S", 256, 50, false}},
    {20, {"IQ4_NL", 32, 18, false}},   {21, {"IQ3_S", 256, 110, false}},
    {22, {"IQ2_S", 256, 82, false}},   {23, {"IQ4_XS", 256, 136, false}},
    {24, {"I8", 1, 1, false}},         {25, {"I16", 1, 2, false}},
    {26, {"I32", 1, 4, false}},        {27, {"I64", 1, 8, false}},
    {28, {"F64", 1, 8, false}},        {29, {"IQ1_M", 256, 56, false}},
    {30, {"BF16", 1, 2, true}},        {34, {"TQ1_0", 256, 54, false}},
    {35, {"TQ2_0", 256, 66, false}},   {39, {"MXFP4", 32, 17, false}},
    {40, {"NVFP4", 64, 36, false}},    {41, {"Q1_0", 128, 18, false}},
};

constexpr int kQK = 32;    // values per block of the legacy types
constexpr int kQKK = 256;  // values per super-block of the K types

// Blocks are packed (a Q4_0 block is 18 bytes): read fields unaligned.
inline float load_f16(const uint8_t *p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return f16_to_f32(h);
}

// Arithmetic: float32 in llama.cpp's reference order (e.g. Q4_K
// (d*sc)*q - dmin*m). Every product here is exact in float32: an fp16 scale has
// an 11-bit significand, times a 6-bit (K) or 8-bit (Q6_K) sub-scale, times a
// quant of at most 6 bits, needs at most 23 bits. So each value is rounded at
// most once, at the final add/subtract, and the result does not depend on
// the association of the products nor on FMA contraction.

// F32: 4 bytes, little-endian float.
void dequant_f32(const uint8_t *src, int64_t n, float *out) {
  std::memcpy(out, src, static_cast<size_t>(n) * sizeof(float));
}

// F16: 2 bytes, IEEE half; exact.
void dequant_f16(const uint8_t *src, int64_t n, float *out) {
  for (int64_t i = 0; i < n; ++i) out[i] = load_f16(src + 2 * i);
}

// BF16: 2 bytes, the high half of a float32; exact.
void dequant_bf16(const uint8_t *src, int64_t n, float *out) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, sizeof h);
    out[i] = bf16_to_f32(h);
  }
}

// The 32-value blocks before the K-quants: f16 d, then f16 m (Q4_1, Q5_1),
// then u32 qh (Q5_0, Q5_1: bit j = 5th bit of value j), then qs[16]
// nibbles, value j in the low nibble of qs[j], value j+16 in the high one.
// Q4_0 is 18 bytes, Q4_1 20, Q5_0 22, Q5_1 24.
// Without m: y = d * (q - 8) (Q4_0) or d * (q - 16) (Q5_0); with m: y = d * q + m.
void dequant_legacy(const uint8_t *src, int64_t n_blocks, float *out, bool has_min, bool has_high) {
  const int64_t block_bytes = 2 + (has_min ? 2 : 0) + (has_high ? 4 : 0) + kQK / 2;
  const int offset = has_min ? 0 : (has_high ? 16 : 8);
  for (int64_t b = 0; b < n_blocks; ++b, src += block_bytes, out += kQK) {
    const float d = load_f16(src);
    const float m = has_min ? load_f16(src + 2) : 0.0f;
    uint32_t qh = 0;
    if (has_high) std::memcpy(&qh, src + (has_min ? 4 : 2), sizeof qh);
    const uint8_t *qs = src + block_bytes - kQK / 2;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int q1 = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      float lo = d * static_cast<float>(q0 - offset);
      float hi = d * static_cast<float>(q1 - offset);
      if (has_min) {
        lo += m;
        hi += m;
      }
      out[j] = lo;
      out[j + kQK / 2] = hi;
    }
  }
}

// Q8_0, 34 bytes / 32 values: f16 d; int8 qs[32]. y = d * q.
void dequant_q8_0(const uint8_t *src, int64_t n_blocks, float *out) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 34, out += kQK) {
    const float d = load_f16(src);
    for (int j = 0; j < kQK; ++j) out[j] = d * static_cast<float>(static_cast<int8_t>(src[2 + j]));
  }
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block,
// packed in 12 bytes: j < 4: low 6 bits of bytes j (scale) and j+4 (min);
// j >= 4: low/high nibble of byte j+4 (scale/min) below the top 2 bits of
// bytes j-4 (scale) and j (min).
inline void k_scale_min(const uint8_t *s, int j, int *sc, int *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K and Q5_K super-blocks of 256 values: f16 d, f16 dmin; 12 bytes of
// 6-bit scales and mins (k_scale_min); qs[128] with 64-value chunk c in
// qs[32c..32c+31], low nibbles for sub-block 2c, high for 2c+1; Q5_K adds
// qh[32] (bit i of qh[l] = 5th bit of value l of sub-block i).
// y = (d*sc) * q - (dmin*m).
void dequant_k_block(const uint8_t *src, const uint8_t *scales, const uint8_t *qh,
                     const uint8_t *qs, float *out) {
  const float d = load_f16(src);
  const float dmin = load_f16(src + 2);
  for (int sub = 0; sub < 8; ++sub) {
    int sc, m;
    k_scale_min(scales, sub, &sc, &m);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = dmin * static_cast<float>(m);
    const uint8_t *q = qs + 32 * (sub / 2);
    const int shift = 4 * (sub % 2);
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> shift) & 0x0f;
      if (qh != nullptr) v |= ((qh[l] >> sub) & 1) << 4;
      const float p = d1 * static_cast<float>(v);
      out[32 * sub + l] = p - m1;
    }
  }
}

// Q4_K: 144 bytes (d, dmin, scales[12], qs[128]).
void dequant_q4_k(const uint8_t *src, int64_t n_blocks, float *out) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 144, out += kQKK)
    dequant_k_block(src, src + 4, nullptr, src + 16, out);
}

// Q5_K: 176 bytes (d, dmin, scales[12], qh[32], qs[128]).
void dequant_q5_k(const uint8_t *src, int64_t n_blocks, float *out) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 176, out += kQKK)
    dequant_k_block(src, src + 4, src + 16, src + 48, out);
}

// Q6_K, 210 bytes / 256 values: ql[128] low nibbles, qh[64] 2-bit high
// parts, int8 scales[16] (one per 16 values), f16 d last. Each 128-value half
// h uses ql[64h..64h+63] and qh[32h..32h+31]: value r (0..127) of the half
// has low 4 bits from ql[64h + r%64] (nibble r/64) and high 2 bits from
// qh[32h + r%32] (bits 2*(r/32)). y = (d*scale) * (q - 32).
void dequant_q6_k(const uint8_t *src, int64_t n_blocks, float *out) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 210, out += kQKK) {
    const uint8_t *ql = src;
    const uint8_t *qh = src + 128;
    const int8_t *scales = reinterpret_cast<const int8_t *>(src + 192);
    const float d = load_f16(src + 208);
    for (int i = 0; i < kQKK; ++i) {
      const int h = i / 128, r = i % 128;
      const int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
      const int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 0x03;
      const float ds = d * static_cast<float>(scales[i / 16]);
      out[i] = ds * static_cast<float>((lo | (hi << 4)) - 32);
    }
  }
}

}  // namespace

const GgmlTypeInfo *ggml_type_info(uint32_t type) {
  for (const TypeRow &row : kTypes)
    if (row.id == type) return &row.info;
  return nullptr;
}

void dequantize(uint32_t type, const void *data, int64_t n, float *out) {
  const GgmlTypeInfo *info = ggml_type_info(type);
  if (!info) fail(VEGAS_ERR_UNSUPPORTED, "unknown GGML tensor type " + std::to_string(type));
  if (!info->dequantizable)
    fail(VEGAS_ERR_UNSUPPORTED,
         std::string("GGML tensor type ") + info->name + " is not supported (cannot dequantize)");
  if (n < 0 || n % info->block_elems != 0)
    fail(VEGAS_ERR_INTERNAL, "dequantize " + std::string(info->name) + ": " + std::to_string(n) +
                                 " values is not a whole number of " +
                                 std::to_string(info->block_elems) + "-value blocks");
  if (n == 0) return;
  const auto *src = static_cast<const uint8_t *>(data);
  const int64_t blocks = n / info->block_elems;
  switch (type) {
    case kGgmlF32:
      return dequant_f32(src, n, out);
    case kGgmlF16:
      return dequant_f16(src, n, out);
    case kGgmlBF16:
      return dequant_bf16(src, n, out);
    case kGgmlQ4_0:
      return dequant_legacy(src, blocks, out, false, false);
    case kGgmlQ4_1:
      return dequant_legacy(src, blocks, out, true, false);
    case kGgmlQ5_0:
      return dequant_legacy(src, blocks, out, false, true);
    case kGgmlQ5_1:
      return dequant_legacy(src, blocks, out, true, true);
    case kGgmlQ8_0:
      return dequant_q8_0(src, blocks, out);
    case kGgmlQ4_K:
      return dequant_q4_k(src, blocks, out);
    case kGgmlQ5_K:
      return dequant_q5_k(src, blocks, out);
    case kGgmlQ6_K:
      return dequant_q6_k(src, blocks, out);
    default:
      break;
  }
  fail(VEGAS_ERR_INTERNAL, std::string("dequantize: no routine for ") + info->name);
}

}  // namespace vegas::gguf
