// GGML's Q8_0 and Q4_0 rows (blocks of [f16 scale][32 values]) split into the
// two aligned arrays a GPU kernel reads (kernels/quant_gemv.cuh): the values
// of every block, row after row, and the scales. Exact: the bytes move, none
// is recomputed.
#pragma once

#include <cstdint>

namespace vegas::gguf {

// Q8_0 or Q4_0 with k a multiple of `k_multiple`: the kernel's own condition.
bool repackable(uint32_t ggml_type, int64_t k, int64_t k_multiple);

// `rows`: n rows of k values in `ggml_type`. `qs`: n * k (Q8_0) or n * k / 2
// (Q4_0) bytes; `scales`: n * k / 32 f16 bit patterns.
void split_ggml_blocks(uint32_t ggml_type, const uint8_t *rows, int64_t n, int64_t k, uint8_t *qs,
                       uint16_t *scales);

}  // namespace vegas::gguf
