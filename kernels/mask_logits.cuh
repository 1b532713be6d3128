// Logits of ids the tokenizer cannot decode: a model's embedding often has
// more rows than its tokenizer has tokens (Qwen2.5/3: 151,936 against
// 151,665), and a row past the tokenizer must never be drawn. The backend
// sets those logits to -inf right after the lm_head, so that every reader
// (argmax, device sampling, candidates, the host's distributions, speculative
// acceptance) sees them masked.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace vegas::kernels {

struct MaskLogitsParams {
  float *logits = nullptr;  // [rows][vocab]
  int32_t rows = 0;
  int32_t vocab = 0;
  int32_t from = 0;  // ids [from, vocab) become -inf; 0 < from < vocab
};

cudaError_t mask_logits(const MaskLogitsParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
