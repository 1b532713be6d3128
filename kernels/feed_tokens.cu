#include "cuda_utils.cuh"
#include "feed_tokens.cuh"

namespace vegas::kernels {

namespace {

constexpr int kThreads = 256;

__global__ void feed_tokens_kernel(FeedTokensParams p) {
  pdl_enter();
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= p.n) return;
  const int src = p.from == nullptr ? i : p.from[i];
  if (src < 0) return;
  p.tokens[i] = p.ids[src] < 0 ? 0 : p.ids[src];
}

}  // namespace

cudaError_t feed_tokens(const FeedTokensParams &p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  if (p.n < 0 || p.ids == nullptr || p.tokens == nullptr) return cudaErrorInvalidValue;
  return launch_kernel(feed_tokens_kernel, (p.n + kThreads - 1) / kThreads, kThreads, 0, stream, p);
}

}  // namespace vegas::kernels
