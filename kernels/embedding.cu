#include "embedding.cuh"

namespace vegas::kernels {

namespace {

__global__ void embedding_kernel(EmbeddingParams p) {
  pdl_enter();
  const int row = blockIdx.x;
  int32_t id = p.tokens[row];
  // Ids are checked on the host; the clamp only keeps a bad id from reading
  // outside the table.
  id = min(max(id, 0), p.vocab - 1);
  const bf16 *src = p.table + static_cast<int64_t>(id) * p.hidden;
  float *dst = p.out + static_cast<int64_t>(row) * p.hidden;
  for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) dst[i] = __bfloat162float(src[i]);
}

}  // namespace

cudaError_t embedding_gather(const EmbeddingParams &p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  return launch_kernel(embedding_kernel, p.rows, 256, 0, stream, p);
}

}  // namespace vegas::kernels
