#include "mask_logits.cuh"

#include <cmath>

#include "cuda_utils.cuh"

namespace vegas::kernels {

namespace {

constexpr int kThreads = 256;

// One block per logit row, its threads over the masked ids.
__global__ void mask_logits_kernel(MaskLogitsParams p) {
  pdl_enter();
  float *row = p.logits + static_cast<int64_t>(blockIdx.x) * p.vocab;
  for (int32_t id = p.from + static_cast<int32_t>(threadIdx.x); id < p.vocab; id += kThreads)
    row[id] = -INFINITY;
}

}  // namespace

cudaError_t mask_logits(const MaskLogitsParams &p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.rows < 0 || p.logits == nullptr || p.from <= 0 || p.from >= p.vocab)
    return cudaErrorInvalidValue;
  return launch_kernel(mask_logits_kernel, p.rows, kThreads, 0, stream, p);
}

}  // namespace vegas::kernels
