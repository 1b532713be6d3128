// What one phase boundary of a decode step costs on this GPU: a chain of
// small dependent kernels (PDL, in a CUDA graph, as a decode step runs today)
// against one persistent kernel whose phases meet at a grid barrier. Each
// phase reads what the previous one wrote (a 2 KiB activation row per block
// and a weight slice independent of it), like a decode step's small GEMMs.
// Prints microseconds per phase for both, medians over replays.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "../../kernels/cuda_utils.cuh"

namespace {

constexpr int kPhases = 40;
constexpr int kThreads = 256;

__device__ float phase_work(const float *__restrict__ in, int block, float wsum) {
  // Each thread reads two activations (what the previous phase wrote) and
  // adds its weight term; a block reduction stands for the GEMM's K sum.
  float v = in[threadIdx.x] + in[threadIdx.x + kThreads] + wsum;
  __shared__ float part[kThreads / 32];
  v = vegas::kernels::warp_sum(v);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0;
  for (int i = 0; i < kThreads / 32; ++i) s += part[i];
  __syncthreads();
  return s * 1e-3f + static_cast<float>(block);
}

__device__ float weight_term(const float *__restrict__ w, int phase, int block) {
  // 16 KiB of "weights" per block and phase.
  const float4 *p = reinterpret_cast<const float4 *>(w) + (int64_t(phase) * 256 + block) * 1024;
  float s = 0;
  for (int i = threadIdx.x; i < 1024; i += kThreads) {
    const float4 x = p[i];
    s += x.x + x.y + x.z + x.w;
  }
  return s;
}

__global__ void chain_kernel(const float *in, float *out, const float *w, int phase) {
  const float wsum = weight_term(w, phase, blockIdx.x);
  vegas::kernels::pdl_wait();
  vegas::kernels::pdl_launch_dependents();
  const float s = phase_work(in, blockIdx.x, wsum);
  if (threadIdx.x < 2) out[blockIdx.x * 2 + threadIdx.x] = s;
}

__device__ void grid_barrier(unsigned *count, unsigned target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(count, 1u);
    unsigned seen;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(count) : "memory");
    } while (seen < target);
  }
  __syncthreads();
}

__global__ void persistent_kernel(float *a, float *b, const float *w, unsigned *count) {
  float *bufs[2] = {a, b};
  float wsum = weight_term(w, 0, blockIdx.x);
  for (int phase = 0; phase < kPhases; ++phase) {
    const float *in = bufs[phase & 1];
    float *out = bufs[(phase + 1) & 1];
    const float s = phase_work(in, blockIdx.x, wsum);
    if (threadIdx.x < 2) out[blockIdx.x * 2 + threadIdx.x] = s;
    // The next phase's weights do not depend on the barrier.
    if (phase + 1 < kPhases) wsum = weight_term(w, phase + 1, blockIdx.x);
    grid_barrier(count, gridDim.x * (phase + 1));
  }
}

void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attr");
  float *a, *b, *w;
  unsigned *count;
  check(cudaMalloc(&a, 1 << 20), "malloc");
  check(cudaMalloc(&b, 1 << 20), "malloc");
  check(cudaMalloc(&w, size_t(kPhases) * 256 * 1024 * 16), "malloc");
  check(cudaMalloc(&count, 4), "malloc");
  check(cudaMemset(a, 0, 1 << 20), "memset");
  check(cudaMemset(w, 0, size_t(kPhases) * 256 * 1024 * 16), "memset");
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int blocks : {sms / 2, sms, 2 * sms}) {
    // The chain: kPhases kernels in one graph.
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
    for (int p = 0; p < kPhases; ++p)
      check(vegas::kernels::launch_kernel(chain_kernel, dim3(blocks), dim3(kThreads), 0, stream,
                                          (p & 1) ? b : a, (p & 1) ? a : b, w, p),
            "chain launch");
    check(cudaStreamEndCapture(stream, &graph), "end capture");
    check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
    std::vector<float> chain_us, persistent_us;
    for (int rep = 0; rep < 60; ++rep) {
      cudaEventRecord(e0, stream);
      check(cudaGraphLaunch(exec, stream), "graph launch");
      cudaEventRecord(e1, stream);
      check(cudaEventSynchronize(e1), "sync");
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      if (rep >= 10) chain_us.push_back(ms * 1000 / kPhases);
      check(cudaMemsetAsync(count, 0, 4, stream), "memset");
      cudaEventRecord(e0, stream);
      persistent_kernel<<<blocks, kThreads, 0, stream>>>(a, b, w, count);
      cudaEventRecord(e1, stream);
      check(cudaEventSynchronize(e1), "sync");
      cudaEventElapsedTime(&ms, e0, e1);
      if (rep >= 10) persistent_us.push_back(ms * 1000 / kPhases);
    }
    std::printf(
        "blocks %4d: PDL kernel chain %.2f us/phase, persistent grid barrier %.2f us/phase\n",
        blocks, median(chain_us), median(persistent_us));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  return 0;
}
