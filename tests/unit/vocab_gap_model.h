// Test helper: a tiny random Qwen3 model whose embedding has more rows (64)
// than its tokenizer has tokens (12, the letters a..l), as Qwen2.5/3 have
// 151,936 rows for 151,665 tokens; and the checks that generation on it
// draws only ids the tokenizer can decode (test_tokenizer_vocab_gap.cpp,
// tests/gpu/test_cuda_logit_mask.cpp).
#pragma once

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "letters_tokenizer.h"
#include "model/model.h"
#include "session/session.h"
#include "tiny_checkpoint.h"

namespace vegas::test {

constexpr int32_t kTokenizerTokens = 12;
constexpr int32_t kEmbeddingRows = 64;

// The model directory (made once per process and head_dim); its eos id is an
// undecodable one, so a sequence could only end early by drawing it.
inline std::string vocab_gap_model_dir(int32_t head_dim) {
  namespace fs = std::filesystem;
  const std::string d =
      (fs::temp_directory_path() /
       ("vegas_vocab_gap_" + std::to_string(::getpid()) + "_" + std::to_string(head_dim)))
          .string();
  if (fs::exists(d + "/tokenizer.json")) return d;
  fs::create_directories(d);
  nlohmann::json config = tiny_config_json("Qwen3ForCausalLM");
  config["vocab_size"] = kEmbeddingRows;
  config["head_dim"] = head_dim;
  config["eos_token_id"] = kEmbeddingRows - 1;
  write_tiny_model(d, config, /*seed=*/3);
  write_bytes(d + "/tokenizer.json", letters_tokenizer_json(kTokenizerTokens));
  return d;
}

// Four sequences sampled at temperature 1.5 (most of the mass on rows past the
// tokenizer), vanilla or Vegas: all run to max_tokens with decodable ids only.
inline void expect_only_decodable_ids(const std::shared_ptr<Model> &model, bool vegas) {
  ASSERT_EQ(model->tokenizer().vocab_size(), kTokenizerTokens);
  ASSERT_EQ(model->config().vocab_size, kEmbeddingRows);
  SessionParams params;
  params.speculative = vegas;
  params.spec.policy = "vegas";
  params.spec.gamma = 3;
  Session session(model, params);
  std::vector<int32_t> ids;
  for (int s = 0; s < 4; ++s) {
    SequenceRequest req;
    for (int t = 0; t < 20 + s; ++t) req.prompt.push_back((t * 5 + s) % kTokenizerTokens);
    req.max_tokens = 24;
    req.sampling.temperature = 1.5f;
    req.sampling.seed = 100 + static_cast<uint64_t>(s);
    ids.push_back(session.submit(std::move(req)));
  }
  session.run();  // before the fix: TOKEN_OUT_OF_RANGE from the first draw past id 11
  for (int32_t id : ids) {
    const Sequence &seq = session.sequence(id);
    EXPECT_EQ(seq.status, VEGAS_OK);
    EXPECT_EQ(seq.n_generated(), 24);
    for (int32_t t : seq.tokens) EXPECT_LT(t, kTokenizerTokens);
  }
}

// The backend's logits with logit_limit set: finite for the tokenizer's ids,
// -inf past them, for every row of a prefill.
inline void expect_masked_logits(const Model &model) {
  ContextParams cp;
  cp.num_pages = 4;
  cp.page_size = 16;
  cp.max_rows = 32;
  cp.logit_limit = kTokenizerTokens;
  auto context = model.backend().create_context(cp);
  std::vector<int32_t> tokens = {1, 2, 3, 4, 5};
  std::vector<int32_t> table = {0};
  SeqRows r;
  r.tokens = tokens.data();
  r.n_tokens = static_cast<int32_t>(tokens.size());
  r.page_table = table.data();
  r.n_pages = 1;
  r.logits = SeqRows::Logits::kAll;
  ForwardBatch batch;
  batch.seqs.push_back(r);
  const float *logits = context->forward(batch);
  for (int32_t row = 0; row < r.n_tokens; ++row)
    for (int32_t id = 0; id < kEmbeddingRows; ++id) {
      const float v = logits[row * kEmbeddingRows + id];
      if (id < kTokenizerTokens)
        EXPECT_TRUE(std::isfinite(v)) << row << " " << id;
      else
        EXPECT_EQ(v, -INFINITY) << row << " " << id;
    }
}

}  // namespace vegas::test
