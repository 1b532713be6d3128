// Linear layers through cuBLASLt: Y[M][N] = X[M][K] · W[N][K]ᵀ (+ Y), X and W
// bf16 (HF Linear layout, row-major), f32 accumulation, Y bf16 or f32. With
// accumulate, Y must be f32: the residual add is fused into the GEMM (beta = 1).
// Plans (layouts + the heuristic's algorithm) are cached per shape, so a
// repeated shape costs no host work and the call is safe inside graph capture.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "backend/cuda/device_buffer.h"

namespace vegas::cuda {

class LtGemm {
 public:
  LtGemm();
  ~LtGemm();
  LtGemm(const LtGemm &) = delete;
  LtGemm &operator=(const LtGemm &) = delete;

  // Throws BACKEND if cuBLASLt has no algorithm for the shape.
  void run(const void *x, const void *w, void *y, bool y_f32, bool accumulate, int64_t m, int64_t n,
           int64_t k, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool>;
  const Plan &plan(const Key &key);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<Key, Plan> plans_;
};

}  // namespace vegas::cuda
