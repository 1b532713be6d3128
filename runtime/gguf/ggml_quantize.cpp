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

}  // namespace

bool quantizable(uint32_t type) {
  return type == kGgmlF32 || type == kGgmlF16 || type == kGgmlBF16 || type == kGgmlQ8_0 ||
         type == kGgmlQ4_0;
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
      default:
        q4_0_block(x + i, o);
        break;
    }
  }
  return out;
}

}  // namespace vegas::gguf
