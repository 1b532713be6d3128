// Encodes float values as a GGML tensor type, for the GGUF files libvegas
// writes (`vegas quantize`): F32, F16, BF16 (round to nearest even), Q8_0 and
// Q4_0 (blocks of 32 with an fp16 scale), Q4_K (super-blocks of 256 with
// 6-bit sub-block scales and mins from each sub-block's range) and Q6_K
// (super-blocks of 256 with int8 scales of 16-value sub-blocks from each one's
// largest magnitude), without the search for better scales that llama.cpp's
// quantizer makes, as the format defines them and ggml_types.h decodes them.
#pragma once

#include <cstdint>
#include <vector>

namespace vegas::gguf {

// Whether quantize() writes `type`.
bool quantizable(uint32_t type);

// `n` values (a multiple of the type's block_elems) as `type` stores them.
std::vector<uint8_t> quantize(uint32_t type, const float *x, int64_t n);

}  // namespace vegas::gguf
