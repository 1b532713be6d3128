#include "model/model.h"

#include <sys/stat.h>

#include "common/error.h"
#include "common/worker_pool.h"
#include "gguf/gguf_model.h"
#include "gguf/gguf_tokenizer.h"

namespace vegas {

// Defined in model_backend.cpp: picks and builds the backend for a model.
std::unique_ptr<BackendModel> make_backend(const ModelConfig &config, const ModelWeights &weights,
                                           const ModelLoadOptions &options);
std::unique_ptr<BackendModel> make_synthetic_backend(const ModelConfig &config, uint64_t seed,
                                                     const ModelLoadOptions &options);

namespace {

void report(const ModelLoadOptions &options, float progress) {
  if (options.progress && !options.progress(progress))
    fail(VEGAS_ERR_CANCELLED, "model load cancelled by the progress callback");
}

uint64_t count_params(const ModelWeights &w) {
  uint64_t n = 0;
  auto add = [&n](const TensorView *t) {
    if (t != nullptr) n += static_cast<uint64_t>(t->numel());
  };
  add(w.embed);
  add(w.final_norm);
  if (w.lm_head != w.embed) add(w.lm_head);
  for (const LayerWeights &l : w.layers) {
    for (const TensorView *t :
         {l.attn_norm, l.wq, l.wk, l.wv, l.bq, l.bk, l.bv, l.q_norm, l.k_norm, l.wo, l.bo,
          l.mlp_norm, l.w_gate, l.w_up, l.w_down, l.b_gate, l.b_up, l.b_down})
      add(t);
  }
  return n;
}

// Parameters of the tensors bind_model_weights would bind for `c`.
uint64_t count_params(const ModelConfig &c) {
  const uint64_t H = static_cast<uint64_t>(c.hidden_size),
                 I = static_cast<uint64_t>(c.intermediate_size);
  const uint64_t q = static_cast<uint64_t>(c.q_dim()), kv = static_cast<uint64_t>(c.kv_dim());
  uint64_t layer = 2 * H + H * (q + 2 * kv) + q * H + 3 * H * I;
  if (c.attention_bias) layer += q + 2 * kv;
  if (c.qk_norm) layer += 2 * static_cast<uint64_t>(c.head_dim);
  if (c.o_bias) layer += H;
  if (c.mlp_bias) layer += 2 * I + H;
  const uint64_t embed = static_cast<uint64_t>(c.vocab_size) * H;
  return embed * (c.tie_word_embeddings ? 1 : 2) + H + layer * static_cast<uint64_t>(c.n_layers);
}

}  // namespace

int32_t Model::host_threads() const {
  return threads_or_hardware(n_threads_);
}

const Tokenizer &Model::tokenizer() const {
  if (tokenizer_ != nullptr) return *tokenizer_;
  if (!tokenizer_refusal_.empty())
    fail(VEGAS_ERR_UNSUPPORTED, "this model's tokenizer is not supported (" + tokenizer_refusal_ +
                                    "): give the model token ids");
  fail(VEGAS_ERR_UNSUPPORTED, "this model is synthetic (random weights from " +
                                  config_.architecture_name + " shapes) and has no tokenizer");
}

std::shared_ptr<Model> Model::synthetic(const std::string &config_path, uint64_t seed,
                                        const ModelLoadOptions &options) {
  auto model = std::shared_ptr<Model>(new Model());
  report(options, 0.0f);
  model->config_ = load_model_config(config_path);
  model->n_params_ = count_params(model->config_);
  model->n_threads_ = options.n_threads;
  model->backend_ = make_synthetic_backend(model->config_, seed, options);
  report(options, 1.0f);
  return model;
}

void Model::set_tokenizer(const std::function<std::unique_ptr<Tokenizer>()> &load,
                          const std::string &vocab_source) {
  try {
    tokenizer_ = load();
  } catch (const Error &e) {
    // A tokenizer of a kind not supported yet (SentencePiece-style BPE) leaves
    // the model usable from token ids; every other tokenizer error fails the load.
    if (e.status() != VEGAS_ERR_UNSUPPORTED) throw;
    tokenizer_refusal_ = e.what();
  }
  if (tokenizer_ && tokenizer_->vocab_size() > config_.vocab_size) {
    // Embedding rows beyond the tokenizer are common (padding); the reverse is not.
    fail(VEGAS_ERR_FORMAT, "tokenizer has " + std::to_string(tokenizer_->vocab_size()) +
                               " tokens but " + vocab_source + " is " +
                               std::to_string(config_.vocab_size));
  }
}

void Model::finish_load(std::unique_ptr<WeightStore> store, const ModelLoadOptions &options) {
  store_ = std::move(store);
  n_threads_ = options.n_threads;
  weights_ = bind_model_weights(config_, *store_);
  n_params_ = count_params(weights_);
  report(options, 0.2f);
  backend_ = make_backend(config_, weights_, options);
  // Both backends compute from their own copies (device memory; the CPU
  // backend's converted matrices): the host's mapping of the checkpoint and
  // the tensors the loader converted (a GGUF file's dequantized matrices,
  // twice its quantized bytes and more) go. A caller's own backend may keep
  // pointers into them.
  if (!options.make_backend) {
    weights_ = ModelWeights{};
    store_.reset();
  }
  report(options, 1.0f);
}

std::shared_ptr<Model> Model::load(const std::string &path, const ModelLoadOptions &options) {
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISREG(st.st_mode)) return load_gguf(path, options);
  if (!exists || !S_ISDIR(st.st_mode))
    fail(VEGAS_ERR_IO, "model '" + path + "' is neither a directory nor a GGUF file");
  auto model = std::shared_ptr<Model>(new Model());
  report(options, 0.0f);
  model->config_ = load_model_config(path + "/config.json");
  report(options, 0.05f);
  model->set_tokenizer([&] { return Tokenizer::load(path); }, "config.json vocab_size");
  report(options, 0.1f);
  model->finish_load(WeightStore::open(path), options);
  return model;
}

std::shared_ptr<Model> Model::load_gguf(const std::string &path, const ModelLoadOptions &options) {
  auto model = std::shared_ptr<Model>(new Model());
  report(options, 0.0f);
  std::shared_ptr<const gguf::File> file = gguf::File::open(path);
  model->config_ = gguf::model_config_from_gguf(*file);
  report(options, 0.05f);
  model->set_tokenizer([&] { return gguf::tokenizer_from_gguf(*file); },
                       "its token_embd.weight rows");
  report(options, 0.1f);
  model->finish_load(gguf::weights_from_gguf(file, model->config_), options);
  return model;
}

}  // namespace vegas
