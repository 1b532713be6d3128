// BackendModel of the CUDA backend: the device, the uploaded weights and the
// facts contexts need (multiprocessor count for the attention split).
#pragma once

#include <memory>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_weights.h"

namespace vegas::cuda {

class CudaBackendModel : public BackendModel {
 public:
  CudaBackendModel(const ModelConfig &config, const CudaBackendOptions &options);
  void set_weights(DeviceWeights weights) { weights_ = std::move(weights); }

  BackendKind kind() const override { return BackendKind::kCuda; }
  const ModelConfig &config() const override { return config_; }
  uint64_t weight_bytes() const override { return weights_.bytes; }
  uint64_t kv_bytes_per_token(bool fp8) const override;
  std::unique_ptr<BackendContext> create_context(const ContextParams &params) override;
  double measure_copy_bandwidth() const override;

  const DeviceWeights &weights() const { return weights_; }
  const CudaBackendOptions &options() const { return options_; }
  int device() const { return options_.device_index; }
  int multiprocessors() const { return multiprocessors_; }
  // Makes this model's device current on the calling thread.
  void activate() const;

 private:
  ModelConfig config_;
  CudaBackendOptions options_;
  DeviceWeights weights_;
  int multiprocessors_ = 0;
};

}  // namespace vegas::cuda
