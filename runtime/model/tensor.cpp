#include "model/tensor.h"

#include <cstring>

#include "common/bf16.h"
#include "common/error.h"
#include "model/fp8_weights.h"

namespace vegas {

const char *dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kF8E4M3:
      return "F8_E4M3";
  }
  return "?";
}

std::string shape_string(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

// Unaligned loads: safetensors does not promise any alignment of the data.
inline float load_element(const unsigned char *p, DType t, int64_t i) {
  if (t == DType::kF8E4M3) return fp8_e4m3_to_f32(p[i]);  // unscaled
  if (t == DType::kF32) {
    float f;
    std::memcpy(&f, p + i * 4, sizeof f);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + i * 2, sizeof h);
  return t == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

}  // namespace

float TensorView::at(int64_t i) const {
  if (i < 0 || i >= numel())
    fail(VEGAS_ERR_INVALID_ARGUMENT, "element " + std::to_string(i) + " out of range for tensor " +
                                         name + " of shape " + shape_string(shape));
  return load_element(static_cast<const unsigned char *>(data), dtype, i);
}

void TensorView::to_f32(float *out) const {
  const auto *p = static_cast<const unsigned char *>(data);
  const int64_t n = numel();
  if (dtype == DType::kF32) {
    std::memcpy(out, p, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = load_element(p, dtype, i);
}

}  // namespace vegas
