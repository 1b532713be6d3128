// A view of one tensor of a checkpoint: name, dtype, shape and its bytes in the
// memory-mapped file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vegas {

// kF8E4M3 only inside a checkpoint being opened: model/fp8_weights.h turns
// such tensors into bf16 with their scales before anything else reads them.
enum class DType { kF32, kF16, kBF16, kF8E4M3 };

inline size_t dtype_size(DType t) {
  return t == DType::kF32 ? 4 : t == DType::kF8E4M3 ? 1 : 2;
}
// The safetensors name: "F32", "F16", "BF16", "F8_E4M3".
const char *dtype_name(DType t);
// "[8192, 512]"
std::string shape_string(const std::vector<int64_t> &shape);

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void *data = nullptr;  // points into a mapped file; lives as long as its WeightStore
  size_t nbytes = 0;           // == numel() * dtype_size(dtype), checked at load
  // The block-quantized rows `data` was dequantized from, when a GGUF file
  // held them as Q8_0 or Q4_0 (gguf/ggml_repack.h): a backend that computes
  // on those blocks takes them instead. Row order is this view's; null if none.
  const uint8_t *ggml_blocks = nullptr;
  uint32_t ggml_type = 0;  // gguf::GgmlType of ggml_blocks
  // The F8_E4M3 codes of an FP8 checkpoint's weight that `data` was
  // dequantized from ([rows][cols], row-major), with one f32 scale per 128
  // values of a row in fp8_scales ([rows][cols / 128]): a backend that
  // computes on them takes them instead. Null where the checkpoint's scales
  // do not fit that layout (groups of fewer than 128 inputs, cols % 128 != 0).
  const uint8_t *fp8 = nullptr;
  const float *fp8_scales = nullptr;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // Element i converted to float; throws INVALID_ARGUMENT when i is out of range.
  float at(int64_t i) const;
  // All elements converted to float into `out` (numel() floats).
  void to_f32(float *out) const;
};

}  // namespace vegas
