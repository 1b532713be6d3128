#include "backend/cuda/lt_gemm.h"

namespace vegas::cuda {

namespace {
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
}

LtGemm::LtGemm() {
  check(cublasLtCreate(&handle_), "cublasLtCreate");
  workspace_.allocate(kWorkspaceBytes, "cuBLASLt workspace");
}

LtGemm::~LtGemm() {
  for (auto &kv : plans_) {
    cublasLtMatrixLayoutDestroy(kv.second.a);
    cublasLtMatrixLayoutDestroy(kv.second.b);
    cublasLtMatrixLayoutDestroy(kv.second.c);
    cublasLtMatmulDescDestroy(kv.second.desc);
  }
  if (handle_) cublasLtDestroy(handle_);
}

// Row-major Y = X·Wᵀ is column-major Yᵀ (N×M) = Wᵀᵀ(N×K) · Xᵀ (K×M): A is W
// seen as a K×N column-major matrix, transposed; B is X seen as K×M.
const LtGemm::Plan &LtGemm::plan(const Key &key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  const auto [m, n, k, y_f32, accumulate] = key;
  Plan p;
  check(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
        "TRANSA");
  check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
        "TRANSB");
  const cudaDataType_t yt = y_f32 ? CUDA_R_32F : CUDA_R_16BF;
  check(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k, n, k), "layout A");
  check(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, k, m, k), "layout B");
  check(cublasLtMatrixLayoutCreate(&p.c, yt, n, m, n), "layout C");
  cublasLtMatmulPreference_t pref;
  check(cublasLtMatmulPreferenceCreate(&pref), "preference");
  const size_t ws = kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof ws);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t s =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.desc);
    fail(VEGAS_ERR_BACKEND, "cuBLASLt: no algorithm for GEMM m=" + std::to_string(m) +
                                " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                                (accumulate ? " (accumulate)" : ""));
  }
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

void LtGemm::run(const void *x, const void *w, void *y, bool y_f32, bool accumulate, int64_t m,
                 int64_t n, int64_t k, cudaStream_t stream) {
  if (m == 0) return;
  if (accumulate && !y_f32) fail(VEGAS_ERR_INTERNAL, "LtGemm: accumulate needs an f32 output");
  const Plan &p = plan(Key{m, n, k, y_f32, accumulate});
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  check(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo,
                       workspace_.get(), workspace_.bytes(), stream),
        "cublasLtMatmul");
}

}  // namespace vegas::cuda
