// Golden fixtures (tests/fixtures, written by tools/make_fixtures.py) and a
// one-sequence model harness over any backend, shared by the CPU golden test
// and the CUDA one (tests/gpu/test_cuda_golden.cpp).
#pragma once

#include <gtest/gtest.h>

#include <functional>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_pool.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/weight_store.h"
#include "model_dir.h"

namespace vegas {
namespace golden {

namespace fs = std::filesystem;
using nlohmann::json;

// The tiny fixtures make_fixtures.py writes; each must exist.
inline const char *const kTinyFixtures[] = {"qwen3",   "qwen2",      "llama3",
                                            "mistral", "llama_yarn", "qwen2_linear"};

// f32 against f32 on different hardware and summation orders: a few 1e-6
// relative on logits of magnitude <= ~20. One wrong detail (a bias, a norm
// weight, a rope band) costs more than 1 (measured when the fixtures were made).
inline constexpr float kLogitTolerance = 1e-3f;
// Greedy steps whose reference top1 - top2 margin is below these are not
// compared: f32 rounding differences may legitimately flip them.
inline constexpr float kTinyMarginFloor = 1e-4f;
inline constexpr float kEmbeddedMarginFloor = 0.005f;
inline constexpr int32_t kPageSize = 16;

inline std::string source_dir() {
  if (const char *env = std::getenv("VEGAS_SOURCE_DIR"); env && *env) return env;
  return VEGAS_SOURCE_DIR;
}

// VEGAS_FIXTURES_DIR overrides tests/fixtures (to try fixtures before committing them).
inline std::string fixtures_dir() {
  if (const char *env = std::getenv("VEGAS_FIXTURES_DIR"); env && *env) return env;
  return source_dir() + "/tests/fixtures";
}

inline std::string model_dir() {
  return test::embedded_model_dir();
}

// True when the fixtures directory exists; otherwise prints why the test skips.
inline bool fixtures_present() {
  if (fs::is_directory(fixtures_dir())) return true;
  std::cerr
      << "\n*** GOLDEN FIXTURES DIRECTORY " << fixtures_dir() << " IS ABSENT: golden tests "
      << "SKIPPED. Run tools/make_fixtures.py on the GPU machine and commit its output. ***\n";
  return false;
}

inline json read_json(const std::string &path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  try {
    return json::parse(in);
  } catch (const json::exception &e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

std::vector<float> read_f32_file(const std::string &path, size_t count) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot open " + path);
  const auto bytes = static_cast<size_t>(in.tellg());
  if (bytes != count * sizeof(float)) {
    throw std::runtime_error(path + " has " + std::to_string(bytes) + " bytes, expected " +
                             std::to_string(count * sizeof(float)));
  }
  std::vector<float> data(count);
  in.seekg(0);
  in.read(reinterpret_cast<char *>(data.data()), static_cast<std::streamsize>(bytes));
  if (!in) throw std::runtime_error("short read of " + path);
  return data;  // the file is little-endian f32, as is every machine we build for
}

inline std::vector<int32_t> read_ids(const json &j, const std::string &what, int32_t vocab) {
  if (!j.is_array() || j.empty()) throw std::runtime_error(what + ": not a non-empty array");
  std::vector<int32_t> ids;
  for (const auto &v : j) {
    const auto id = v.get<int64_t>();
    if (id < 0 || id >= vocab) {
      throw std::runtime_error(what + ": token id " + std::to_string(id) + " outside vocab " +
                               std::to_string(vocab));
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

inline std::vector<float> read_margins(const json &j, const std::string &what, size_t count) {
  auto m = j.get<std::vector<float>>();
  if (m.size() != count) {
    throw std::runtime_error(what + ": " + std::to_string(m.size()) + " margins for " +
                             std::to_string(count) + " tokens");
  }
  return m;
}

// Index of the largest logit, the lowest index on ties.
inline int32_t argmax(const float *logits, int32_t n) {
  return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
}

// One model on the CPU backend with one sequence in a paged KV cache.
using BackendFactory =
    std::function<std::unique_ptr<BackendModel>(const ModelConfig &, const ModelWeights &)>;

inline std::unique_ptr<BackendModel> make_cpu(const ModelConfig &c, const ModelWeights &w) {
  return create_cpu_backend(c, w, CpuBackendOptions{});
}

class GoldenModel {
 public:
  // `max_tokens`: the longest sequence; `scatter_pages`: interleave the
  // sequence's pages with a spacer's, so a page-table lookup that assumes
  // contiguous pages reads the wrong K/V.
  // `kv_fp8`: the fp8 KV cache (ContextParams::kv_fp8).
  GoldenModel(const std::string &dir, int32_t max_tokens, int32_t max_rows, bool scatter_pages,
              const BackendFactory &make_backend = make_cpu, bool kv_fp8 = false)
      : GoldenModel(load_model_config(dir + "/config.json"), WeightStore::open(dir), max_tokens,
                    max_rows, scatter_pages, make_backend, kv_fp8) {}
  // A model from another source (a GGUF file's config and tensors).
  GoldenModel(ModelConfig config, std::unique_ptr<WeightStore> store, int32_t max_tokens,
              int32_t max_rows, bool scatter_pages, const BackendFactory &make_backend = make_cpu,
              bool kv_fp8 = false)
      : config_(std::move(config)),
        store_(std::move(store)),
        weights_(bind_model_weights(config_, *store_)),
        backend_(make_backend(config_, weights_)),
        max_tokens_(max_tokens),
        scatter_(scatter_pages),
        pool_(pages_needed(max_tokens, scatter_pages), kPageSize) {
    ContextParams params;
    params.num_pages = pool_.num_pages();
    params.page_size = kPageSize;
    params.max_rows = max_rows;
    params.kv_fp8 = kv_fp8;
    context_ = backend_->create_context(params);
    reset();
  }

  const ModelConfig &config() const { return config_; }
  const BackendModel &backend() const { return *backend_; }
  int32_t vocab() const { return config_.vocab_size; }
  int32_t length() const { return length_; }

  // Empties the sequence (its pages are reused by the next one).
  void reset() {
    pool_.release(table_);
    pool_.release(spacer_);
    const int32_t pages = static_cast<int32_t>(pool_.pages_for(max_tokens_));
    for (int32_t p = 1; p <= pages; ++p) {
      pool_.reserve(table_, int64_t{p} * kPageSize);
      if (scatter_) pool_.reserve(spacer_, int64_t{p} * kPageSize);
    }
    length_ = 0;
  }

  // Appends `n` tokens to the sequence and returns the requested logits rows.
  const float *forward(const int32_t *tokens, int32_t n, SeqRows::Logits which) {
    if (length_ + n > max_tokens_) throw std::runtime_error("test sequence longer than planned");
    SeqRows rows;
    rows.tokens = tokens;
    rows.n_tokens = n;
    rows.start_pos = length_;
    rows.page_table = table_.data();
    rows.n_pages = static_cast<int32_t>(table_.size());
    rows.logits = which;
    ForwardBatch batch;
    batch.seqs.push_back(rows);
    const float *logits = context_->forward(batch);
    length_ += n;
    return logits;
  }

  // Feeds `ids` in chunks of at most `chunk` rows; returns the last row's logits.
  const float *prefill(const std::vector<int32_t> &ids, int32_t chunk) {
    const float *logits = nullptr;
    for (size_t i = 0; i < ids.size(); i += static_cast<size_t>(chunk)) {
      const auto n = static_cast<int32_t>(std::min(ids.size() - i, static_cast<size_t>(chunk)));
      const bool last = i + static_cast<size_t>(n) == ids.size();
      logits = forward(ids.data() + i, n, last ? SeqRows::Logits::kLast : SeqRows::Logits::kNone);
    }
    return logits;
  }

 private:
  static int32_t pages_needed(int32_t max_tokens, bool scatter) {
    const int32_t pages = (max_tokens + kPageSize - 1) / kPageSize;
    return scatter ? 2 * pages : pages;
  }

  ModelConfig config_;
  std::unique_ptr<WeightStore> store_;
  ModelWeights weights_;
  std::unique_ptr<BackendModel> backend_;
  int32_t max_tokens_;
  bool scatter_;
  KvPool pool_;
  std::unique_ptr<BackendContext> context_;
  std::vector<int32_t> table_, spacer_;
  int32_t length_ = 0;
};

// Greedy decoding fed with the reference's tokens (so one low-margin step
// cannot derail the rest): at every step whose reference margin is at least
// `margin_floor`, our argmax must be the reference token.
struct GreedyReport {
  int32_t compared = 0;
  int32_t skipped = 0;  // low-margin steps
  int32_t first_skipped = -1;
  int32_t mismatches = 0;
  std::string first_mismatch;
};

inline GreedyReport check_greedy(GoldenModel &model, const float *first_logits,
                                 const std::vector<int32_t> &ref_ids,
                                 const std::vector<float> &margins, float margin_floor) {
  GreedyReport r;
  const float *logits = first_logits;
  for (size_t step = 0; step < ref_ids.size(); ++step) {
    const int32_t ours = argmax(logits, model.vocab());
    if (margins[step] < margin_floor) {
      if (r.first_skipped < 0) r.first_skipped = static_cast<int32_t>(step);
      ++r.skipped;
    } else {
      ++r.compared;
      if (ours != ref_ids[step]) {
        if (r.mismatches++ == 0) {
          std::ostringstream os;
          os << "step " << step << ": ours " << ours << " (logit " << logits[ours]
             << "), reference " << ref_ids[step] << " (our logit " << logits[ref_ids[step]]
             << ", reference margin " << margins[step] << ")";
          r.first_mismatch = os.str();
        }
      }
    }
    if (step + 1 < ref_ids.size())
      logits = model.forward(&ref_ids[step], 1, SeqRows::Logits::kLast);
  }
  return r;
}

// --------------------------------------------------------------- tiny models

struct TinyFixture {
  std::string dir;
  std::vector<int32_t> prompt;
  std::vector<float> logits;  // [prompt.size()][vocab]
  std::vector<int32_t> greedy_ids;
  std::vector<float> greedy_margins;
};

inline TinyFixture load_tiny_fixture(const std::string &dir, int32_t vocab) {
  TinyFixture f;
  f.dir = dir;
  const json j = read_json(dir + "/fixture.json");
  f.prompt = read_ids(j.at("prompt_ids"), dir + " prompt_ids", vocab);
  const auto shape = j.at("logits_shape").get<std::vector<int64_t>>();
  if (shape.size() != 2 || shape[0] != static_cast<int64_t>(f.prompt.size()) || shape[1] != vocab) {
    throw std::runtime_error(dir + "/fixture.json: logits_shape does not match " +
                             std::to_string(f.prompt.size()) + " prompt ids x vocab " +
                             std::to_string(vocab));
  }
  // The reference logits of every position are transformers' final hidden
  // states (after the final norm) times the checkpoint's lm_head, rebuilt here
  // in double; the few rows stored as transformers computed them must agree
  // with the rebuild, which proves it (the fixtures stay small enough to travel).
  const auto hshape = j.at("hidden_shape").get<std::vector<int64_t>>();
  if (hshape.size() != 2 || hshape[0] != static_cast<int64_t>(f.prompt.size()))
    throw std::runtime_error(dir + "/fixture.json: hidden_shape does not match the prompt");
  const size_t rows = f.prompt.size();
  const size_t hidden = static_cast<size_t>(hshape[1]);
  const std::vector<float> h =
      read_f32_file(dir + "/" + j.at("hidden_file").get<std::string>(), rows * hidden);
  const vegas::ModelConfig config = vegas::load_model_config(dir + "/config.json");
  const auto store = vegas::WeightStore::open(dir);
  const vegas::ModelWeights weights = vegas::bind_model_weights(config, *store);
  std::vector<float> head(static_cast<size_t>(weights.lm_head->numel()));
  weights.lm_head->to_f32(head.data());
  if (head.size() != static_cast<size_t>(vocab) * hidden)
    throw std::runtime_error(dir + ": lm_head does not match vocab x hidden");
  f.logits.resize(rows * static_cast<size_t>(vocab));
  for (size_t r = 0; r < rows; ++r)
    for (size_t v = 0; v < static_cast<size_t>(vocab); ++v) {
      double acc = 0.0;
      for (size_t k = 0; k < hidden; ++k)
        acc += static_cast<double>(h[r * hidden + k]) * head[v * hidden + k];
      f.logits[r * vocab + v] = static_cast<float>(acc);
    }
  const auto stored_rows = j.at("logits_rows").get<std::vector<int64_t>>();
  const std::vector<float> stored = read_f32_file(
      dir + "/" + j.at("logits_rows_file").get<std::string>(), stored_rows.size() * vocab);
  for (size_t i = 0; i < stored_rows.size(); ++i)
    for (size_t v = 0; v < static_cast<size_t>(vocab); ++v) {
      const float want = stored[i * vocab + v];
      const float got = f.logits[static_cast<size_t>(stored_rows[i]) * vocab + v];
      if (std::fabs(want - got) > 1e-5f)
        throw std::runtime_error(dir + ": rebuilt logit of row " + std::to_string(stored_rows[i]) +
                                 " token " + std::to_string(v) + " is " + std::to_string(got) +
                                 ", transformers computed " + std::to_string(want));
    }
  f.greedy_ids = read_ids(j.at("greedy_ids"), dir + " greedy_ids", vocab);
  f.greedy_margins =
      read_margins(j.at("greedy_margins"), dir + " greedy_margins", f.greedy_ids.size());
  return f;
}

// Fixture names: the expected ones plus any other directory holding a fixture.json.
inline std::vector<std::string> tiny_fixture_names() {
  std::vector<std::string> names(std::begin(kTinyFixtures), std::end(kTinyFixtures));
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(fixtures_dir(), ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && fs::exists(entry.path() / "fixture.json") &&
        std::find(names.begin(), names.end(), name) == names.end()) {
      names.push_back(name);
    }
  }
  return names;
}

}  // namespace golden
}  // namespace vegas
