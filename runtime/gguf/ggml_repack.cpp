#include "gguf/ggml_repack.h"

#include <cstring>

#include "common/error.h"
#include "gguf/ggml_types.h"

namespace vegas::gguf {

bool kernel_readable(uint32_t ggml_type) {
  return ggml_type == kGgmlQ8_0 || ggml_type == kGgmlQ4_0 || ggml_type == kGgmlQ4_K ||
         ggml_type == kGgmlQ5_K || ggml_type == kGgmlQ6_K;
}

bool repackable(uint32_t ggml_type, int64_t k, int64_t k_multiple) {
  return kernel_readable(ggml_type) && k > 0 && k % k_multiple == 0 &&
         k % ggml_type_info(ggml_type)->block_elems == 0;
}

void split_ggml_blocks(uint32_t ggml_type, const uint8_t *rows, int64_t n, int64_t k, uint8_t *qs,
                       uint16_t *scales) {
  if (!repackable(ggml_type, k, 32))
    fail(VEGAS_ERR_INTERNAL,
         "split_ggml_blocks: not Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K rows of whole blocks");
  const GgmlTypeInfo &info = *ggml_type_info(ggml_type);
  if (ggml_type == kGgmlQ4_K || ggml_type == kGgmlQ5_K) {
    std::memcpy(qs, rows, static_cast<size_t>(n * (k / 256) * info.block_bytes));
    return;
  }
  if (ggml_type == kGgmlQ6_K) {  // ql, qh, scales (208 bytes), then d
    for (int64_t b = 0; b < n * (k / 256); ++b) {
      const uint8_t *block = rows + b * info.block_bytes;
      std::memcpy(qs + b * 208, block, 208);
      std::memcpy(&scales[b], block + 208, 2);
    }
    return;
  }
  const int64_t value_bytes = info.block_bytes - 2;  // after the f16 scale
  const int64_t blocks = n * (k / 32);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t *block = rows + b * info.block_bytes;
    std::memcpy(&scales[b], block, 2);
    std::memcpy(qs + b * value_bytes, block + 2, static_cast<size_t>(value_bytes));
  }
}

}  // namespace vegas::gguf
