// Binding checkpoint tensors to the layer structure: the embedded model, a tiny
// random checkpoint of each architecture, and missing or mis-shaped tensors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "common/error.h"
#include "model/model_weights.h"
#include "safetensors_writer.h"
#include "support/model_dir.h"
#include "tiny_checkpoint.h"

namespace vegas {
namespace {

using nlohmann::json;

std::string model_dir() {
  return test::embedded_model_dir();
}

void expect_error(const std::function<void()> &f, vegas_status status,
                  std::initializer_list<std::string> needles) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), status) << e.what();
    for (const std::string &n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message '" << e.what() << "' lacks '" << n << "'";
  }
}

// Proves the embedded Qwen3 model binds completely: tied head, q/k norms, no biases.
TEST(ModelWeights, EmbeddedModel) {
  const ModelConfig c = load_model_config(model_dir() + "/config.json");
  auto store = WeightStore::open(model_dir());
  const ModelWeights w = bind_model_weights(c, *store);
  ASSERT_EQ(w.layers.size(), 8u);
  EXPECT_EQ(w.lm_head, w.embed);
  EXPECT_EQ(w.embed->shape, (std::vector<int64_t>{8192, 512}));
  for (const LayerWeights &l : w.layers) {
    ASSERT_NE(l.q_norm, nullptr);
    ASSERT_NE(l.k_norm, nullptr);
    EXPECT_EQ(l.wq->shape, (std::vector<int64_t>{512, 512}));
    EXPECT_EQ(l.wk->shape, (std::vector<int64_t>{128, 512}));
    EXPECT_EQ(l.w_down->shape, (std::vector<int64_t>{512, 1024}));
    EXPECT_EQ(l.bq, nullptr);
    EXPECT_EQ(l.bo, nullptr);
    EXPECT_EQ(l.b_gate, nullptr);
  }
  EXPECT_EQ(w.layers[5].wv, store->find("model.layers.5.self_attn.v_proj.weight"));
}

struct Bound {
  test::TempDir dir;
  ModelConfig config;
  std::unique_ptr<WeightStore> store;
  ModelWeights weights;
  explicit Bound(const json &config_json) {
    config = test::write_tiny_model(dir.path(), config_json);
    store = WeightStore::open(dir.path());
    weights = bind_model_weights(config, *store);
  }
};

// Proves each architecture binds exactly the tensors its config implies:
// Qwen2 q/k/v biases, Llama attention+MLP biases with an untied head, Mistral
// none, Qwen3 q/k norms with a tied head and q_dim != hidden.
TEST(ModelWeights, EachArchitecture) {
  {
    Bound b(test::tiny_config_json("Qwen2ForCausalLM"));
    const LayerWeights &l = b.weights.layers[1];
    ASSERT_NE(l.bq, nullptr);
    EXPECT_EQ(l.bk->shape, (std::vector<int64_t>{16}));  // 2 kv heads x 8
    EXPECT_EQ(l.bo, nullptr);
    EXPECT_EQ(l.q_norm, nullptr);
    EXPECT_NE(b.weights.lm_head, b.weights.embed);
  }
  {
    json j = test::tiny_config_json("LlamaForCausalLM");
    j["attention_bias"] = true;
    j["mlp_bias"] = true;
    Bound b(j);
    const LayerWeights &l = b.weights.layers[0];
    ASSERT_NE(l.bo, nullptr);
    EXPECT_EQ(l.bo->shape, (std::vector<int64_t>{32}));
    ASSERT_NE(l.b_gate, nullptr);
    EXPECT_EQ(l.b_gate->shape, (std::vector<int64_t>{48}));
    EXPECT_EQ(l.b_down->shape, (std::vector<int64_t>{32}));
    EXPECT_EQ(b.weights.lm_head, b.store->find("lm_head.weight"));
  }
  {
    Bound b(test::tiny_config_json("MistralForCausalLM"));
    const LayerWeights &l = b.weights.layers[1];
    EXPECT_EQ(l.bq, nullptr);
    EXPECT_EQ(l.bo, nullptr);
    EXPECT_EQ(l.b_up, nullptr);
    EXPECT_NE(l.w_up, nullptr);
  }
  {
    json j = test::tiny_config_json("Qwen3ForCausalLM");
    j["tie_word_embeddings"] = true;
    j["head_dim"] = 16;  // q_dim 64 != hidden 32
    Bound b(j);
    const LayerWeights &l = b.weights.layers[0];
    EXPECT_EQ(l.wq->shape, (std::vector<int64_t>{64, 32}));
    EXPECT_EQ(l.wo->shape, (std::vector<int64_t>{32, 64}));
    EXPECT_EQ(l.q_norm->shape, (std::vector<int64_t>{16}));
    EXPECT_EQ(b.weights.lm_head, b.weights.embed);
  }
}

// Writes a tiny checkpoint of `config_json` whose tensors pass through `edit`,
// then expects binding to fail with FORMAT and every needle.
void expect_bind_error(const json &config_json,
                       const std::function<void(std::vector<test::FakeTensor> &)> &edit,
                       std::initializer_list<std::string> needles) {
  test::TempDir dir;
  const ModelConfig c = parse_model_config(config_json.dump(), "config.json");
  auto tensors = test::tiny_model_tensors(c, 3);
  edit(tensors);
  test::write_safetensors(dir.file("model.safetensors"), tensors);
  auto store = WeightStore::open(dir.path());
  expect_error([&] { bind_model_weights(c, *store); }, VEGAS_ERR_FORMAT, needles);
}

void erase_named(std::vector<test::FakeTensor> &ts, const std::string &name) {
  for (auto it = ts.begin(); it != ts.end(); ++it) {
    if (it->name == name) {
      ts.erase(it);
      return;
    }
  }
  FAIL() << "no tensor " << name;
}

// Proves a missing weight, bias, norm or head, and a mis-shaped tensor, are
// FORMAT errors naming the tensor (and both shapes).
TEST(ModelWeights, MissingOrMisshaped) {
  const json llama = test::tiny_config_json("LlamaForCausalLM");
  expect_bind_error(llama,
                    [](auto &ts) { erase_named(ts, "model.layers.1.self_attn.k_proj.weight"); },
                    {"missing tensor model.layers.1.self_attn.k_proj.weight"});
  expect_bind_error(llama, [](auto &ts) { erase_named(ts, "lm_head.weight"); },
                    {"missing tensor lm_head.weight"});
  expect_bind_error(llama, [](auto &ts) { erase_named(ts, "model.norm.weight"); },
                    {"model.norm.weight"});
  expect_bind_error(llama,
                    [](auto &ts) {
                      for (auto &t : ts)
                        if (t.name == "model.layers.0.mlp.up_proj.weight")
                          t.shape = {32, 48};  // transposed
                    },
                    {"model.layers.0.mlp.up_proj.weight", "[32, 48]", "expected [48, 32]"});
  expect_bind_error(test::tiny_config_json("Qwen2ForCausalLM"),
                    [](auto &ts) { erase_named(ts, "model.layers.0.self_attn.v_proj.bias"); },
                    {"model.layers.0.self_attn.v_proj.bias"});
  expect_bind_error(test::tiny_config_json("Qwen3ForCausalLM"),
                    [](auto &ts) { erase_named(ts, "model.layers.1.self_attn.q_norm.weight"); },
                    {"model.layers.1.self_attn.q_norm.weight"});
  // A config claiming more layers than the checkpoint holds.
  json more = llama;
  test::TempDir dir;
  test::write_tiny_model(dir.path(), llama);
  more["num_hidden_layers"] = 3;
  const ModelConfig c3 = parse_model_config(more.dump(), "config.json");
  auto store = WeightStore::open(dir.path());
  expect_error([&] { bind_model_weights(c3, *store); }, VEGAS_ERR_FORMAT,
               {"missing tensor model.layers.2.input_layernorm.weight"});
  // ... and fewer: the checkpoint's last layer was silently ignored (issue
  // P1, hostile files).
  json fewer = llama;
  fewer["num_hidden_layers"] = 1;
  const ModelConfig c1 = parse_model_config(fewer.dump(), "config.json");
  expect_error([&] { bind_model_weights(c1, *store); }, VEGAS_ERR_FORMAT,
               {"model.layers.1.", "past the 1 layers config.json lists"});
}

}  // namespace
}  // namespace vegas
