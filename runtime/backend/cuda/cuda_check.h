// CUDA and cuBLASLt status checks that throw vegas::Error (BACKEND, or
// OUT_OF_MEMORY for allocation failures) naming the failed operation.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "common/error.h"

namespace vegas::cuda {

inline void check(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return;
  const vegas_status status =
      e == cudaErrorMemoryAllocation ? VEGAS_ERR_OUT_OF_MEMORY : VEGAS_ERR_BACKEND;
  fail(status, std::string("CUDA: ") + what + ": " + cudaGetErrorName(e) + " (" +
                   cudaGetErrorString(e) + ")");
}

inline void check(cublasStatus_t s, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const vegas_status status =
      s == CUBLAS_STATUS_ALLOC_FAILED ? VEGAS_ERR_OUT_OF_MEMORY : VEGAS_ERR_BACKEND;
  fail(status, std::string("cuBLASLt: ") + what + ": status " + std::to_string(int(s)));
}

}  // namespace vegas::cuda
