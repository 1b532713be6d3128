#include "gguf/ggml_repack.h"

#include <cstring>

#include "common/error.h"
#include "gguf/ggml_types.h"

namespace vegas::gguf {

bool repackable(uint32_t ggml_type, int64_t k, int64_t k_multiple) {
  return (ggml_type == kGgmlQ8_0 || ggml_type == kGgmlQ4_0) && k > 0 && k % k_multiple == 0 &&
         k % 32 == 0;
}

void split_ggml_blocks(uint32_t ggml_type, const uint8_t *rows, int64_t n, int64_t k, uint8_t *qs,
                       uint16_t *scales) {
  if (!repackable(ggml_type, k, 32))
    fail(VEGAS_ERR_INTERNAL, "split_ggml_blocks: not Q8_0 / Q4_0 rows of whole blocks");
  const GgmlTypeInfo &info = *ggml_type_info(ggml_type);
  const int64_t value_bytes = info.block_bytes - 2;  // after the f16 scale
  const int64_t blocks = n * (k / 32);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t *block = rows + b * info.block_bytes;
    std::memcpy(&scales[b], block, 2);
    std::memcpy(qs + b * value_bytes, block + 2, static_cast<size_t>(value_bytes));
  }
}

}  // namespace vegas::gguf
