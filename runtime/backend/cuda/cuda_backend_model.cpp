#include "backend/cuda/cuda_backend_model.h"

#include <string>

#include "backend/cuda/cuda_context.h"
#include "kv_select.cuh"
#include "paged_attention.cuh"
#include "prefill_attention.cuh"
#include "qkv_rope.cuh"
#include "small_gemm.cuh"
#include "verify_attention.cuh"

namespace vegas {

int32_t cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error here
    return 0;
  }
  return n;
}

namespace cuda {

namespace {

void check_supported(const ModelConfig &c) {
  const int32_t group = c.n_kv_heads > 0 ? c.n_heads / c.n_kv_heads : 0;
  if (c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads != 0 ||
      !kernels::paged_attention_supports(c.head_dim, group))
    fail(VEGAS_ERR_UNSUPPORTED, "CUDA backend: head_dim " + std::to_string(c.head_dim) + " with " +
                                    std::to_string(c.n_heads) + " query / " +
                                    std::to_string(c.n_kv_heads) +
                                    " KV heads is not supported (head_dim 16, 32, 48, 64, 80, "
                                    "96, 112, 128, 160, 192 or 256; group <= 64)");
  // Sliding windows: sequences longer than the window are refused by the session.
  if (c.o_bias) fail(VEGAS_ERR_UNSUPPORTED, "CUDA backend: an o_proj bias is not supported");
  if (c.mlp_bias) fail(VEGAS_ERR_UNSUPPORTED, "CUDA backend: MLP biases are not supported");
  if (c.rotary_dim() % 2 != 0 || c.rotary_dim() > c.head_dim)
    fail(VEGAS_ERR_UNSUPPORTED, "CUDA backend: rotary_dim " + std::to_string(c.rotary_dim()) +
                                    " must be even and at most head_dim");
}

}  // namespace

CudaBackendModel::CudaBackendModel(const ModelConfig &config, const CudaBackendOptions &options)
    : config_(config), options_(options) {
  check_supported(config_);
  const int32_t n = cuda_device_count();
  if (options_.device_index < 0 || options_.device_index >= n)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "CUDA backend: device " +
                                         std::to_string(options_.device_index) +
                                         " does not exist (" + std::to_string(n) + " found)");
  activate();
  check(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount,
                               options_.device_index),
        "multiprocessor count");
  check(kernels::paged_attention_init(), "attention kernel attributes");
  check(kernels::prefill_attention_init(), "prefill attention kernel attributes");
  check(kernels::verify_attention_init(), "verify attention kernel attributes");
  check(kernels::small_gemm_init(), "small GEMM kernel attributes");
  check(kernels::qkv_rope_mma_init(), "fused qkv kernel attributes");
  check(kernels::kv_select_init(), "selection kernel attributes");
}

void CudaBackendModel::activate() const {
  check(cudaSetDevice(options_.device_index), "cudaSetDevice");
}

uint64_t CudaBackendModel::kv_bytes_per_token(bool fp8) const {
  return DeviceKvCache::bytes_per_token(config_.n_layers, config_.n_kv_heads, config_.head_dim,
                                        fp8);
}

std::unique_ptr<BackendContext> CudaBackendModel::create_context(const ContextParams &params) {
  return std::make_unique<CudaContext>(*this, params);
}

}  // namespace cuda

std::unique_ptr<BackendModel> create_cuda_backend(const ModelConfig &config,
                                                  const ModelWeights &weights,
                                                  const CudaBackendOptions &options) {
  auto model = std::make_unique<cuda::CudaBackendModel>(config, options);
  model->set_weights(cuda::DeviceWeights::upload(config, weights));
  return model;
}

std::unique_ptr<BackendModel> create_cuda_backend_synthetic(const ModelConfig &config,
                                                            uint64_t seed,
                                                            const CudaBackendOptions &options) {
  auto model = std::make_unique<cuda::CudaBackendModel>(config, options);
  using W = CudaBackendOptions::SyntheticWeights;
  using F = kernels::QuantFormat;
  cuda::WeightPlan plan;
  switch (options.synthetic_weights) {
    case W::kBf16:
      plan = cuda::WeightPlan::uniform(config, std::nullopt);
      break;
    case W::kQ8_0:
      plan = cuda::WeightPlan::uniform(config, F::kQ8_0);
      break;
    case W::kQ4_0:
      plan = cuda::WeightPlan::uniform(config, F::kQ4_0);
      break;
    case W::kQ4_K:
      plan = cuda::WeightPlan::uniform(config, F::kQ4_K);
      break;
    case W::kQ5_K:
      plan = cuda::WeightPlan::uniform(config, F::kQ5_K);
      break;
    case W::kQ6_K:
      plan = cuda::WeightPlan::uniform(config, F::kQ6_K);
      break;
    case W::kQ4_K_M:
      plan = cuda::WeightPlan::k_m(config, F::kQ4_K);
      break;
    case W::kQ5_K_M:
      plan = cuda::WeightPlan::k_m(config, F::kQ5_K);
      break;
    case W::kF8:
      plan = cuda::WeightPlan::uniform(config, F::kF8);
      break;
  }
  model->set_weights(cuda::DeviceWeights::synthetic(config, seed, plan));
  return model;
}

}  // namespace vegas
