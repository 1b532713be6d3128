// The CUDA backend (DESIGN §7): weights in device memory as bf16, bf16
// activations with f32 accumulation, the KV pool in device memory, GEMMs
// through cuBLASLt, our kernels (kernels/) for the rest, decode steps replayed
// as CUDA graphs bucketed by batch size. This header includes no CUDA header,
// so any part of the runtime may include it.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace vegas {

struct CudaBackendOptions {
  int32_t device_index = 0;
  // Replay pure decode steps (one row per sequence) as CUDA graphs.
  bool use_graphs = true;
  // create_cuda_backend_synthetic: the layer matrices (and an untied head)
  // kept in this format, random (benchmarks of quantized weights).
  enum class SyntheticWeights {
    kBf16,
    kQ8_0,
    kQ4_0,
    kQ4_K,
    kQ5_K,
    kQ6_K,
    kQ4_K_M,
    kQ5_K_M,
    kF8
  } synthetic_weights = SyntheticWeights::kBf16;
};

// Number of CUDA devices usable by this process (0 when no driver/device).
int32_t cuda_device_count();

// Uploads the weights (converted to bf16). Throws UNSUPPORTED for shapes the
// kernels do not cover (a head_dim outside paged_attention_supports' list, a
// GQA group above 64), OUT_OF_MEMORY, BACKEND.
std::unique_ptr<BackendModel> create_cuda_backend(const ModelConfig &config,
                                                  const ModelWeights &weights,
                                                  const CudaBackendOptions &options);

// A model of `config`'s shapes with deterministic pseudo-random bf16 weights
// made directly in device memory (benchmarks of models not on disk, e.g.
// `vegas bench --synthetic`). Same seed, same weights.
std::unique_ptr<BackendModel> create_cuda_backend_synthetic(const ModelConfig &config,
                                                            uint64_t seed,
                                                            const CudaBackendOptions &options);

}  // namespace vegas
