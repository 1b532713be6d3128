// Device time of the single-row (decode, batch 1) operations of one layer of
// vegas-code-22m, each replayed 200 times back to back inside one CUDA graph so
// launch overhead is excluded: where a 2K x 1 decode step's time goes.
//   usage: bench_cuda_op_latency
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/lt_gemm.h"
#include "rmsnorm.cuh"

using vegas::cuda::check;

namespace {

// Median over 7 replays of a graph holding `reps` calls of `op`, per call, in µs.
double per_call_us(cudaStream_t s, const std::function<void()> &op) {
  const int reps = 200;
  cudaGraph_t g;
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "capture");
  for (int i = 0; i < reps; ++i) op();
  check(cudaStreamEndCapture(s, &g), "end capture");
  cudaGraphExec_t e;
  check(cudaGraphInstantiate(&e, g, 0), "instantiate");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  std::vector<double> t;
  for (int i = 0; i < 8; ++i) {
    check(cudaEventRecord(a, s), "record");
    check(cudaGraphLaunch(e, s), "launch");
    check(cudaEventRecord(b, s), "record");
    check(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    if (i > 0) t.push_back(ms * 1e3 / reps);  // the first replay warms up
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main() {
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  vegas::cuda::LtGemm gemm;
  const int64_t H = 512, QKV = 768, I = 1024, V = 8192;
  vegas::cuda::DeviceBuffer x(16 << 20, "x"), w(64 << 20, "w"), y(16 << 20, "y");
  check(cudaMemset(x.get(), 0, x.bytes()), "memset");
  check(cudaMemset(w.get(), 0, w.bytes()), "memset");
  struct Shape {
    const char *name;
    int64_t n, k;
    bool f32, acc;
    int per_step;
  };
  const Shape shapes[] = {{"qkv", QKV, H, false, false, 8},
                          {"o+res", H, H, true, true, 8},
                          {"gate_up", 2 * I, H, false, false, 8},
                          {"down+res", H, I, true, true, 8},
                          {"lm_head", V, H, true, false, 1}};
  double total = 0;
  for (const Shape &sh : shapes) {
    const double us = per_call_us(
        s, [&] { gemm.run(x.get(), w.get(), y.get(), sh.f32, sh.acc, 1, sh.n, sh.k, s); });
    total += us * sh.per_step;
    std::printf("gemm %-9s m=1 n=%-5lld k=%-5lld %7.2f us  x%d per step\n", sh.name,
                static_cast<long long>(sh.n), static_cast<long long>(sh.k), us, sh.per_step);
  }
  vegas::kernels::RmsNormParams np;
  np.x = x.get<float>();
  np.weight = w.get<vegas::kernels::bf16>();
  np.out = y.get<vegas::kernels::bf16>();
  np.rows = 1;
  np.hidden = static_cast<int32_t>(H);
  const double norm = per_call_us(s, [&] { check(vegas::kernels::rmsnorm(np, s), "rmsnorm"); });
  std::printf("rmsnorm rows=1 hidden=512  %7.2f us  x17 per step (a floor for any tiny kernel)\n",
              norm);
  std::printf("GEMMs per 22m step: %.1f us\n", total);
  cudaStreamDestroy(s);
  return 0;
}
