#include "backend/cuda/decode_graphs.h"

#include "backend/cuda/cuda_check.h"

namespace vegas::cuda {

void DeviceGraphs::run(const Key &key, cudaStream_t stream, const std::function<void()> &enqueue) {
  auto it = execs_.find(key);
  if (it != execs_.end()) {
    check(cudaGraphLaunch(it->second, stream), "cudaGraphLaunch");
    return;
  }
  // First sight: eager, creates the GEMM plans.
  if (seen_[key]++ == 0 || execs_.size() >= kMaxGraphs) {
    enqueue();
    return;
  }
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
  try {
    enqueue();
  } catch (...) {
    cudaGraph_t broken = nullptr;
    cudaStreamEndCapture(stream, &broken);
    if (broken) cudaGraphDestroy(broken);
    throw;
  }
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(stream, &graph), "end capture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check(e, "cudaGraphInstantiate");
  execs_.emplace(key, exec);
  check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
}

void DeviceGraphs::clear() {
  for (auto &kv : execs_) cudaGraphExecDestroy(kv.second);
  execs_.clear();
  seen_.clear();
}

}  // namespace vegas::cuda
