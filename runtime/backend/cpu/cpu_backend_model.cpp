#include "backend/cpu/cpu_backend_model.h"

#include <string>

#include "backend/cpu/cpu_context.h"
#include "common/error.h"
#include "common/worker_pool.h"
#include "model/rope.h"

namespace vegas {
namespace {

// The shapes the forward pass relies on; a config that breaks them would
// index out of bounds.
void check_config(const ModelConfig &c) {
  auto positive = [](int64_t v, const char *name) {
    if (v <= 0) {
      fail(VEGAS_ERR_FORMAT,
           std::string("CPU backend: config ") + name + " = " + std::to_string(v) + " must be > 0");
    }
  };
  positive(c.vocab_size, "vocab_size");
  positive(c.hidden_size, "hidden_size");
  positive(c.intermediate_size, "intermediate_size");
  positive(c.n_layers, "num_hidden_layers");
  positive(c.n_heads, "num_attention_heads");
  positive(c.n_kv_heads, "num_key_value_heads");
  positive(c.head_dim, "head_dim");
  if (c.n_heads % c.n_kv_heads != 0) {
    fail(VEGAS_ERR_FORMAT, "CPU backend: num_attention_heads " + std::to_string(c.n_heads) +
                               " is not a multiple of num_key_value_heads " +
                               std::to_string(c.n_kv_heads));
  }
  if (c.mlp_bias) fail(VEGAS_ERR_UNSUPPORTED, "CPU backend: mlp_bias is not supported");
  if (c.o_bias) fail(VEGAS_ERR_UNSUPPORTED, "CPU backend: an o_proj bias is not supported");
}

}  // namespace

CpuBackendModel::CpuBackendModel(const ModelConfig &config, const ModelWeights &weights,
                                 const CpuBackendOptions &options)
    : config_(config) {
  check_config(config_);
  if (options.n_threads < 0 || options.n_threads > kMaxCpuThreads) {
    fail(VEGAS_ERR_INVALID_ARGUMENT, "CPU backend: n_threads " + std::to_string(options.n_threads) +
                                         " is outside [0, " + std::to_string(kMaxCpuThreads) + "]");
  }
  n_threads_ = threads_or_hardware(options.n_threads);
  inv_freq_ = vegas::rope_inv_freq(config_);
  rope_scaling_ = vegas::rope_attention_scaling(config_);
  if (inv_freq_.empty() || static_cast<int64_t>(inv_freq_.size()) * 2 > config_.head_dim) {
    fail(VEGAS_ERR_FORMAT, "CPU backend: " + std::to_string(inv_freq_.size()) +
                               " rotary frequencies do not fit head_dim " +
                               std::to_string(config_.head_dim));
  }
  weights_ = convert_weights(config_, weights, options.progress);
}

uint64_t CpuBackendModel::kv_bytes_per_token(bool fp8) const {
  (void)fp8;  // the CPU keeps f32 either way (ContextParams::kv_fp8)
  return uint64_t{2} * static_cast<uint64_t>(config_.n_layers) *
         static_cast<uint64_t>(config_.kv_dim()) * sizeof(float);
}

std::unique_ptr<BackendContext> CpuBackendModel::create_context(const ContextParams &params) {
  return std::make_unique<CpuContext>(*this, params);
}

std::unique_ptr<BackendModel> create_cpu_backend(const ModelConfig &config,
                                                 const ModelWeights &weights,
                                                 const CpuBackendOptions &options) {
  return std::make_unique<CpuBackendModel>(config, weights, options);
}

}  // namespace vegas
