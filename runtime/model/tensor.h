// A view of one tensor of a checkpoint: name, dtype, shape and its bytes in the
// memory-mapped file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vegas {

enum class DType { kF32, kF16, kBF16 };

inline size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }
const char *dtype_name(DType t);

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void *data = nullptr;  // points into a mapped file; lives as long as its WeightStore
  size_t nbytes = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // Element i converted to float.
  float at(int64_t i) const;
  // All elements converted to float into `out` (numel() floats).
  void to_f32(float *out) const;
};

}  // namespace vegas
