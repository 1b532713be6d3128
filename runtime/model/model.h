// A loaded model: config, mapped checkpoint, bound weights, tokenizer and the
// weights on a backend. Immutable after load; shared by sessions (shared_ptr).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/weight_store.h"
#include "tokenizer/tokenizer.h"

namespace vegas {

struct ModelLoadOptions {
  BackendKind backend = BackendKind::kCpu;
  bool backend_auto = true;  // pick CUDA when built and a device is present
  int32_t device_index = 0;
  int32_t n_threads = 0;
  // Called with progress in [0, 1]; returns false to cancel.
  std::function<bool(float)> progress;
  // Benchmarks and tests: makes the backend instead of the CPU or CUDA one
  // (bench_session_host times the host's share of a step against a backend
  // that computes nothing).
  std::function<std::unique_ptr<BackendModel>(const ModelConfig &, const ModelWeights &)>
      make_backend;
};

class Model {
 public:
  // A Hugging Face model directory, or a GGUF file (gguf/gguf_model.h).
  // Throws vegas::Error.
  static std::shared_ptr<Model> load(const std::string &path, const ModelLoadOptions &options);
  // A model of config.json's shapes with deterministic random bf16 weights made
  // on the backend (benchmarks of models not on disk): no checkpoint and no
  // tokenizer. CUDA only: UNSUPPORTED for the CPU backend, NOT_BUILT without CUDA.
  static std::shared_ptr<Model> synthetic(const std::string &config_path, uint64_t seed,
                                          const ModelLoadOptions &options);

  const ModelConfig &config() const { return config_; }
  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  // Throws UNSUPPORTED for a synthetic model (it has no tokenizer) and for a
  // model whose tokenizer is of a kind not supported yet (it loads without).
  const Tokenizer &tokenizer() const;
  BackendModel &backend() const { return *backend_; }
  // CPU threads the library's host work for this model may use: the load
  // options' n_threads, or the hardware's for 0.
  int32_t host_threads() const;
  uint64_t n_params() const { return n_params_; }

 private:
  static std::shared_ptr<Model> load_gguf(const std::string &path, const ModelLoadOptions &options);
  // Keeps the tokenizer, or why there is none when it is of a kind not
  // supported yet (every other tokenizer error fails the load).
  void set_tokenizer(const std::function<std::unique_ptr<Tokenizer>()> &load,
                     const std::string &vocab_source);
  void finish_load(std::unique_ptr<WeightStore> store, const ModelLoadOptions &options);
  ModelConfig config_;
  // The host's weights: released once the backend has made its own copy
  // (kept for a caller's make_backend).
  std::unique_ptr<WeightStore> store_;
  ModelWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::string tokenizer_refusal_;  // why tokenizer_ is null for a loaded model
  std::unique_ptr<BackendModel> backend_;
  int32_t n_threads_ = 0;  // ModelLoadOptions::n_threads
  uint64_t n_params_ = 0;
};

}  // namespace vegas
