// Model loading and queries of the C ABI.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

#include "api/api_guard.h"
#include "api/api_handles.h"
#include "gguf/gguf_export.h"
#include "model/fp8_export.h"

using vegas::api::guarded;
using vegas::api::read_options;
using vegas::api::require_non_null;

namespace {

// The public model options as the loader's (INVALID_ARGUMENT for bad values).
vegas::ModelLoadOptions load_options(const vegas_model_options *options) {
  vegas_model_options opts;
  vegas_model_options_init(&opts);
  read_options(options, &opts, "vegas_model_options");
  vegas::ModelLoadOptions load;
  switch (opts.backend) {
    case VEGAS_BACKEND_AUTO:
      load.backend_auto = true;
      break;
    case VEGAS_BACKEND_CPU:
      load.backend_auto = false;
      load.backend = vegas::BackendKind::kCpu;
      break;
    case VEGAS_BACKEND_CUDA:
      load.backend_auto = false;
      load.backend = vegas::BackendKind::kCuda;
      break;
    default:
      vegas::fail(VEGAS_ERR_INVALID_ARGUMENT,
                  "unknown backend " + std::to_string(opts.backend) + " in vegas_model_options");
  }
  if (opts.n_threads < 0 || opts.n_threads > vegas::kMaxCpuThreads)
    vegas::fail(VEGAS_ERR_INVALID_ARGUMENT, "n_threads " + std::to_string(opts.n_threads) +
                                                " is outside [0, " +
                                                std::to_string(vegas::kMaxCpuThreads) + "]");
  load.device_index = opts.device_index;
  load.n_threads = opts.n_threads;
  if (opts.progress != nullptr) {
    const vegas_progress_fn fn = opts.progress;
    void *user_data = opts.progress_user_data;
    load.progress = [fn, user_data](float p) { return fn(p, user_data) == 0; };
  }
  return load;
}

}  // namespace

extern "C" {

VEGAS_API void vegas_model_options_init_sized(vegas_model_options *options, size_t size) {
  vegas_model_options o{};
  o.backend = VEGAS_BACKEND_AUTO;
  vegas::abi::init_struct(o, options, size);
}

VEGAS_API vegas_status vegas_model_load(const char *dir, const vegas_model_options *options,
                                        vegas_model **out) {
  return guarded([&] {
    require_non_null(dir, "dir");
    require_non_null(out, "out");
    const vegas::ModelLoadOptions load = load_options(options);
    auto handle = std::make_unique<vegas_model>();
    handle->impl = vegas::Model::load(dir, load);
    // A tokenizer of a kind not supported yet: the model works from token ids.
    handle->tokenizer.impl = handle->impl->has_tokenizer() ? &handle->impl->tokenizer() : nullptr;
    handle->dir = dir;
    *out = handle.release();
  });
}

VEGAS_API vegas_status vegas_model_load_synthetic(const char *config_json_path, uint64_t seed,
                                                  const vegas_model_options *options,
                                                  vegas_model **out) {
  return guarded([&] {
    require_non_null(config_json_path, "config_json_path");
    require_non_null(out, "out");
    const vegas::ModelLoadOptions load = load_options(options);
    auto handle = std::make_unique<vegas_model>();
    handle->impl = vegas::Model::synthetic(config_json_path, seed, load);
    handle->tokenizer.impl = nullptr;  // no tokenizer: vegas_model_tokenizer returns NULL
    *out = handle.release();
  });
}

VEGAS_API void vegas_model_free(vegas_model *model) {
  delete model;
}

VEGAS_API const vegas_tokenizer *vegas_model_tokenizer(const vegas_model *model) {
  if (model == nullptr) {
    vegas::api::set_last_error("model is NULL");
    return nullptr;
  }
  if (model->tokenizer.impl == nullptr) {
    try {
      (void)model->impl->tokenizer();  // throws, saying why there is none
    } catch (const std::exception &e) {
      vegas::api::set_last_error(e.what());
    }
    return nullptr;
  }
  vegas::api::clear_last_error();
  return &model->tokenizer;
}

VEGAS_API vegas_status vegas_model_get_info(const vegas_model *model, vegas_model_info *out) {
  return guarded([&] {
    require_non_null(model, "model");
    require_non_null(out, "out");
    vegas::abi::check_struct_size(out->struct_size, "vegas_model_info");
    const vegas::ModelConfig &c = model->impl->config();
    const vegas::BackendModel &b = model->impl->backend();
    vegas_model_info info{};
    info.backend = b.kind() == vegas::BackendKind::kCuda ? VEGAS_BACKEND_CUDA : VEGAS_BACKEND_CPU;
    info.n_layers = c.n_layers;
    info.hidden_size = c.hidden_size;
    info.n_heads = c.n_heads;
    info.n_kv_heads = c.n_kv_heads;
    info.head_dim = c.head_dim;
    info.vocab_size = c.vocab_size;
    info.max_context =
        static_cast<int32_t>(c.max_position > 0x7fffffff ? 0x7fffffff : c.max_position);
    info.n_params = model->impl->n_params();
    info.weight_bytes = b.weight_bytes();
    info.kv_bytes_per_token = b.kv_bytes_per_token(false);
    std::strncpy(info.architecture, c.architecture_name.c_str(), sizeof(info.architecture) - 1);
    vegas::abi::write_struct(info, out, "vegas_model_info");
  });
}

VEGAS_API vegas_status vegas_model_measure_bandwidth(const vegas_model *model,
                                                     double *bytes_per_second) {
  return guarded([&] {
    require_non_null(model, "model");
    require_non_null(bytes_per_second, "bytes_per_second");
    *bytes_per_second = model->impl->backend().measure_copy_bandwidth();
  });
}

VEGAS_API vegas_status vegas_model_quantize(const char *model_dir, const char *out_path,
                                            const char *type) {
  return guarded([&] {
    require_non_null(model_dir, "model_dir");
    require_non_null(out_path, "out_path");
    require_non_null(type, "type");
    std::string t = type;
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
    if (t == "fp8")
      vegas::export_fp8(model_dir, out_path);
    else
      vegas::gguf::export_gguf(model_dir, out_path, vegas::gguf::export_type(type));
  });
}

}  // extern "C"
