// GGUF models as llama.cpp writes them: tiny golden models converted by its
// own convert_hf_to_gguf.py and quantized by its own quantizer
// (tools/gguf/make_fixtures.sh; tests/fixtures/gguf/tiny-models.tar.xz,
// unpacked by CMake into VEGAS_GGUF_TINY_DIR), against the Hugging Face
// checkpoints they came from and transformers' logits for them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_model.h"
#include "gguf/gguf_tokenizer.h"
#include "model/model.h"
#include "model/rope.h"
#include "support/golden.h"

namespace vegas {
namespace {

using namespace golden;  // NOLINT: the fixture helpers

struct Loaded {
  ModelConfig config;
  std::unique_ptr<WeightStore> store;
};

Loaded load_gguf(const std::string &path) {
  std::shared_ptr<const gguf::File> file = gguf::File::open(path);
  Loaded l;
  l.config = gguf::model_config_from_gguf(*file);
  l.store = gguf::weights_from_gguf(file, l.config);
  return l;
}

// Relative L2 distance of two tensors' values.
double relative_l2(const TensorView &a, const TensorView &b) {
  std::vector<float> x(static_cast<size_t>(a.numel())), y(static_cast<size_t>(b.numel()));
  a.to_f32(x.data());
  b.to_f32(y.data());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    norm += double(y[i]) * y[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

class GgufTiny : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!fixtures_present()) GTEST_SKIP() << "fixtures directory absent: " << fixtures_dir();
    hf_dir_ = fixtures_dir() + "/" + GetParam();
    path_ = test::gguf_tiny_file(GetParam() + "-bf16");
    ASSERT_TRUE(fs::exists(path_)) << path_ << " is missing";
  }
  std::string hf_dir_, path_;
};

// Proves the metadata gives the config.json the model was converted from:
// shapes, biases, q/k norm, tied head, special ids, rope (Llama 3's scaling
// arrives as per-pair factors: its frequencies must be the formula's).
TEST_P(GgufTiny, ConfigMatchesConfigJson) {
  const ModelConfig hf = load_model_config(hf_dir_ + "/config.json");
  const ModelConfig g = load_gguf(path_).config;
  EXPECT_EQ(g.arch, hf.arch);
  EXPECT_EQ(g.vocab_size, hf.vocab_size);
  EXPECT_EQ(g.hidden_size, hf.hidden_size);
  EXPECT_EQ(g.intermediate_size, hf.intermediate_size);
  EXPECT_EQ(g.n_layers, hf.n_layers);
  EXPECT_EQ(g.n_heads, hf.n_heads);
  EXPECT_EQ(g.n_kv_heads, hf.n_kv_heads);
  EXPECT_EQ(g.head_dim, hf.head_dim);
  EXPECT_EQ(g.max_position, hf.max_position);
  EXPECT_EQ(g.rms_norm_eps, hf.rms_norm_eps);
  EXPECT_EQ(g.tie_word_embeddings, hf.tie_word_embeddings);
  EXPECT_EQ(g.qk_norm, hf.qk_norm);
  EXPECT_EQ(g.attention_bias, hf.attention_bias);
  EXPECT_EQ(g.o_bias, hf.o_bias);
  EXPECT_EQ(g.mlp_bias, hf.mlp_bias);
  EXPECT_EQ(g.bos_token_id, hf.bos_token_id);
  EXPECT_EQ(g.eos_token_id, hf.eos_token_id);
  EXPECT_EQ(rope_attention_scaling(g), rope_attention_scaling(hf));
  const std::vector<float> gf = rope_inv_freq(g), hff = rope_inv_freq(hf);
  ASSERT_EQ(gf.size(), hff.size());
  for (size_t i = 0; i < gf.size(); ++i)
    EXPECT_NEAR(gf[i], hff[i], 2e-7 * std::fabs(hff[i])) << "rope frequency " << i;
}

// Proves every tensor the model binds holds the checkpoint's values, in the
// checkpoint's layout (Llama's q/k rows put back in Hugging Face's order).
TEST_P(GgufTiny, TensorsEqualCheckpoint) {
  const Loaded g = load_gguf(path_);
  const auto hf = WeightStore::open(hf_dir_);
  const ModelWeights gw = bind_model_weights(g.config, *g.store);
  (void)gw;  // binding checks every shape
  for (const auto &[name, view] : hf->tensors()) {
    const TensorView *t = g.store->find(name);
    if (name == "lm_head.weight" && g.config.tie_word_embeddings) continue;
    ASSERT_NE(t, nullptr) << name << " is not in the GGUF file";
    ASSERT_EQ(t->shape, view.shape) << name;
    EXPECT_EQ(relative_l2(*t, view), 0.0) << name;
  }
}

// Proves the GGUF model computes transformers' logits (f32 math) at every
// position of the fixture's prompt, as the checkpoint does (test_golden).
TEST_P(GgufTiny, PrefillLogitsMatchTransformers) {
  Loaded g = load_gguf(path_);
  GoldenModel model(std::move(g.config), std::move(g.store), 128, 128, /*scatter_pages=*/true);
  const TinyFixture f = load_tiny_fixture(hf_dir_, model.vocab());
  const float *got =
      model.forward(f.prompt.data(), static_cast<int32_t>(f.prompt.size()), SeqRows::Logits::kAll);
  float worst = 0;
  for (size_t i = 0; i < f.logits.size(); ++i) {
    const float err = std::fabs(got[i] - f.logits[i]);
    if (!(err <= worst)) worst = err;  // NaN sticks
  }
  EXPECT_LE(worst, kLogitTolerance);
  std::cout << "[gguf] " << GetParam() << ": max |logit error| " << worst << "\n";
}

// qwen3: q/k norm, tied head; llama3: the rotary row order, rope_freqs,
// untied head. (The other tiny models' files would push the repository past
// what a device call carries.)
INSTANTIATE_TEST_SUITE_P(Converted, GgufTiny, ::testing::Values("qwen3", "llama3"),
                         [](const auto &param_info) { return param_info.param; });

// Proves a quantized file (llama.cpp's Q4_K_M recipe, which at hidden 32
// falls back to 32-value blocks: Q5_0 and Q8_0) dequantizes to within 4-bit
// error of the checkpoint in every tensor: a misplaced row or block would
// leave a relative error near 1.4.
TEST(GgufQuantized, TensorsNearCheckpoint) {
  for (const std::string name : {"qwen3"}) {
    const Loaded g = load_gguf(test::gguf_tiny_file(name + "-Q4_K_M"));
    const auto hf = WeightStore::open(fixtures_dir() + "/" + name);
    double worst = 0;
    std::string worst_name;
    for (const auto &[tensor, view] : hf->tensors()) {
      if (tensor == "lm_head.weight" && g.config.tie_word_embeddings) continue;
      const TensorView *t = g.store->find(tensor);
      ASSERT_NE(t, nullptr) << tensor;
      ASSERT_EQ(t->shape, view.shape) << tensor;
      const double e = relative_l2(*t, view);
      if (e > worst) {
        worst = e;
        worst_name = tensor;
      }
    }
    EXPECT_LT(worst, 0.08) << name << ": " << worst_name;
    std::cout << "[gguf] " << name << " Q4_K_M: worst tensor relative L2 " << worst << " ("
              << worst_name << ")\n";
  }
}

// Proves Model::load takes a GGUF path: config, tokenizer and weights come
// from the one file, and the parameter count is the checkpoint's.
TEST(GgufModel, LoadsFromOnePath) {
  ModelLoadOptions options;
  options.backend_auto = false;
  const auto g = Model::load(test::gguf_tiny_file("qwen3-bf16"), options);
  ASSERT_TRUE(g->has_tokenizer());
  EXPECT_EQ(g->config().vocab_size, 8192);
  const auto tok = Tokenizer::load(test::embedded_model_dir());
  const std::string text = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n";
  EXPECT_EQ(g->tokenizer().encode(text, false, true), tok->encode(text, false, true));
}

// Proves a file cut short anywhere is a FORMAT (or IO) error, never a crash
// or a read past the end: the real file truncated at 300 points.
TEST(GgufFile, TruncatedFileIsFormatError) {
  std::ifstream in(test::gguf_tiny_file("qwen3-bf16"), std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000u);
  for (size_t cut = 0; cut < bytes.size(); cut += bytes.size() / 300 + 1) {
    // A copy of exactly `cut` bytes, so that reading past it is an ASan error.
    std::vector<uint8_t> part(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(cut));
    try {
      gguf::File::parse(part.data(), part.size(), "cut");
      ADD_FAILURE() << "a file cut at " << cut << " of " << bytes.size() << " bytes parsed";
    } catch (const Error &e) {
      EXPECT_EQ(e.status(), VEGAS_ERR_FORMAT) << "cut at " << cut << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace vegas
