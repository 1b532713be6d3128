// Embedding gather: residual[row] = f32(table[tokens[row]]).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_utils.cuh"

namespace vegas::kernels {

struct EmbeddingParams {
  const int32_t *tokens = nullptr;  // [rows]; ids were range-checked on the host
  const bf16 *table = nullptr;      // [vocab][hidden]
  float *out = nullptr;             // [rows][hidden]
  int32_t rows = 0;
  int32_t hidden = 0;
  int32_t vocab = 0;
};

cudaError_t embedding_gather(const EmbeddingParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
