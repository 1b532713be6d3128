// An owned CUDA event (destroyed even when a check throws), for the backend's
// event timing (copy bandwidth, CudaContext::replay_seconds).
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"

namespace vegas::cuda {

struct Event {
  cudaEvent_t e = nullptr;
  Event() { check(cudaEventCreate(&e), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(e); }
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;
};

}  // namespace vegas::cuda
