// Greedy sampling on the device: the lowest index of the largest logit of
// each row (the host rule of sampling.h's argmax()).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace vegas::kernels {

struct ArgmaxParams {
  const float *logits = nullptr;  // [rows][vocab]
  int32_t *out = nullptr;         // [rows]
  int32_t rows = 0;
  int32_t vocab = 0;
};

cudaError_t argmax(const ArgmaxParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
