// The CPU reference backend's model: f32 weights, rotary frequencies and the
// thread count; it makes CpuContexts.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_weights.h"

namespace vegas {

class CpuBackendModel final : public BackendModel {
 public:
  CpuBackendModel(const ModelConfig &config, const ModelWeights &weights,
                  const CpuBackendOptions &options);

  BackendKind kind() const override { return BackendKind::kCpu; }
  const ModelConfig &config() const override { return config_; }
  uint64_t weight_bytes() const override { return weights_.bytes(); }
  uint64_t kv_bytes_per_token(bool fp8) const override;
  std::unique_ptr<BackendContext> create_context(const ContextParams &params) override;
  double measure_copy_bandwidth() const override;

  const CpuWeights &weights() const { return weights_; }
  const std::vector<float> &rope_inv_freq() const { return inv_freq_; }
  float rope_scaling() const { return rope_scaling_; }
  int n_threads() const { return n_threads_; }

 private:
  ModelConfig config_;
  CpuWeights weights_;
  std::vector<float> inv_freq_;  // rotary_dim / 2 inverse frequencies
  float rope_scaling_ = 1.f;     // multiplies cos and sin (yarn's mscale)
  int n_threads_ = 1;
};

}  // namespace vegas
