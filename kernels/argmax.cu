#include <cub/block/block_reduce.cuh>

#include "argmax.cuh"
#include "cuda_utils.cuh"

namespace vegas::kernels {

namespace {

constexpr int kThreads = 512;

struct MaxAt {
  float value;
  int32_t index;
};

// Larger value wins; ties go to the lower index. NaN never wins.
struct MaxAtOp {
  __device__ MaxAt operator()(const MaxAt &a, const MaxAt &b) const {
    if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
    return a;
  }
};

__global__ void argmax_kernel(ArgmaxParams p) {
  pdl_enter();
  using Reduce = cub::BlockReduce<MaxAt, kThreads>;
  __shared__ typename Reduce::TempStorage temp;
  const float *row = p.logits + static_cast<int64_t>(blockIdx.x) * p.vocab;
  MaxAt best{-INFINITY, 0x7fffffff};
  for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
    const float v = row[i];
    if (v > best.value) best = MaxAt{v, i};  // i grows per thread: first max kept
  }
  const MaxAt total = Reduce(temp).Reduce(best, MaxAtOp());
  if (threadIdx.x == 0) p.out[blockIdx.x] = total.index == 0x7fffffff ? 0 : total.index;
}

}  // namespace

cudaError_t argmax(const ArgmaxParams &p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  return launch_kernel(argmax_kernel, p.rows, kThreads, 0, stream, p);
}

}  // namespace vegas::kernels
