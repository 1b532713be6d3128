// GGML rows in the arrays a GPU kernel reads (kernels/quant_gemv.cuh). Q8_0
// and Q4_0 (blocks of [f16 scale][32 values]) split into the values of every
// block, row after row, and the scales; Q4_K and Q5_K blocks stay as they are; Q6_K
// blocks lose their trailing f16 d to the scales array (208 aligned bytes
// left). Exact: the bytes move, none is recomputed.
#pragma once

#include <cstdint>

namespace vegas::gguf {

// The GGML types whose rows a GPU kernel reads: Q8_0, Q4_0, Q4_K, Q5_K, Q6_K.
bool kernel_readable(uint32_t ggml_type);

// A kernel_readable type with k a multiple of `k_multiple` and of the type's
// block: the kernel's own condition.
bool repackable(uint32_t ggml_type, int64_t k, int64_t k_multiple);

// `rows`: n rows of k values in `ggml_type`. `qs`: n * k (Q8_0), n * k / 2
// (Q4_0), n * k / 256 * 144 (Q4_K), * 176 (Q5_K) or * 208 (Q6_K) bytes; `scales`: n * k /
// 32 (Q8_0, Q4_0), none (Q4_K, Q5_K: may be null) or n * k / 256 (Q6_K) f16 bit
// patterns.
void split_ggml_blocks(uint32_t ggml_type, const uint8_t *rows, int64_t n, int64_t k, uint8_t *qs,
                       uint16_t *scales);

}  // namespace vegas::gguf
