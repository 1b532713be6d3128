// config.json parsing: the embedded model, the shared real-model configs, each
// architecture's defaults, each rope variant, and every rejection path.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/model_config.h"
#include "safetensors_writer.h"
#include "support/model_dir.h"
#include "tiny_checkpoint.h"

namespace vegas {
namespace {

using nlohmann::json;

std::string env_or(const char *name, const std::string &fallback) {
  const char *v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string shared_dir() {
  return env_or("VEGAS_SHARED_DIR", std::string(VEGAS_SOURCE_DIR) + "/../shared");
}

ModelConfig parse(const json &j) {
  return parse_model_config(j.dump(), "test/config.json");
}

// Runs `f`, expects a vegas::Error with `status` whose message contains every needle.
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

// Proves the embedded model's config (transformers-5 rope_parameters style) is
// read with the numbers DESIGN.md §9 gives.
TEST(ModelConfig, EmbeddedModel) {
  const ModelConfig c = load_model_config(test::embedded_model_dir() + "/config.json");
  EXPECT_EQ(c.arch, Architecture::kQwen3);
  EXPECT_EQ(c.architecture_name, "Qwen3ForCausalLM");
  EXPECT_EQ(c.n_layers, 8);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.hidden_size, 512);
  EXPECT_EQ(c.intermediate_size, 1024);
  EXPECT_EQ(c.vocab_size, 8192);
  EXPECT_EQ(c.max_position, 32768);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_EQ(c.rope.type, RopeType::kDefault);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);  // from rope_parameters, not the 1e4 default
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.eos_token_id, 0);
  EXPECT_EQ(c.rotary_dim(), 64);
}

// Proves the three shared public-model configs parse with their real shapes,
// including Qwen3-4B's q_dim != hidden and Llama 3.1's llama3 rope and eos list.
TEST(ModelConfig, SharedConfigs) {
  const std::string dir = shared_dir() + "/configs";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no " << dir;

  const ModelConfig q8 = load_model_config(dir + "/qwen3-8b.json");
  EXPECT_EQ(q8.arch, Architecture::kQwen3);
  EXPECT_EQ(q8.n_layers, 36);
  EXPECT_EQ(q8.hidden_size, 4096);
  EXPECT_EQ(q8.intermediate_size, 12288);
  EXPECT_EQ(q8.n_heads, 32);
  EXPECT_EQ(q8.n_kv_heads, 8);
  EXPECT_EQ(q8.head_dim, 128);
  EXPECT_EQ(q8.vocab_size, 151936);
  EXPECT_FALSE(q8.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(q8.rope.theta, 1e6);
  EXPECT_EQ(q8.rope.type, RopeType::kDefault);  // "rope_scaling": null
  EXPECT_EQ(q8.eos_token_id, 151645);
  EXPECT_EQ(q8.bos_token_id, 151643);
  EXPECT_EQ(q8.max_position, 40960);

  const ModelConfig q4 = load_model_config(dir + "/qwen3-4b.json");
  EXPECT_EQ(q4.hidden_size, 2560);
  EXPECT_EQ(q4.intermediate_size, 9728);
  EXPECT_EQ(q4.q_dim(), 4096);  // 32 heads x 128 is wider than hidden: allowed with head_dim
  EXPECT_EQ(q4.kv_dim(), 1024);
  EXPECT_TRUE(q4.tie_word_embeddings);

  const ModelConfig l = load_model_config(dir + "/llama-3.1-8b.json");
  EXPECT_EQ(l.arch, Architecture::kLlama);
  EXPECT_EQ(l.n_layers, 32);
  EXPECT_EQ(l.hidden_size, 4096);
  EXPECT_EQ(l.intermediate_size, 14336);
  EXPECT_EQ(l.head_dim, 128);  // derived: 4096 / 32
  EXPECT_EQ(l.n_kv_heads, 8);
  EXPECT_EQ(l.vocab_size, 128256);
  EXPECT_DOUBLE_EQ(l.rms_norm_eps, 1e-5);
  EXPECT_FALSE(l.qk_norm);
  EXPECT_FALSE(l.attention_bias);
  EXPECT_FALSE(l.mlp_bias);
  EXPECT_EQ(l.rope.type, RopeType::kLlama3);
  EXPECT_DOUBLE_EQ(l.rope.theta, 500000.0);
  EXPECT_DOUBLE_EQ(l.rope.factor, 8.0);
  EXPECT_DOUBLE_EQ(l.rope.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(l.rope.high_freq_factor, 4.0);
  EXPECT_EQ(l.rope.original_max_position, 8192);
  EXPECT_EQ(l.max_position, 131072);
  EXPECT_EQ(l.eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  EXPECT_EQ(l.eos_token_id, 128001);
}

// Proves Qwen2's fixed q/k/v bias (and no o_proj bias, no qk norm), the derived
// head_dim and the top-level rope_theta.
TEST(ModelConfig, Qwen2) {
  json j = test::tiny_config_json("Qwen2ForCausalLM");
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = 1000000.0;
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.arch, Architecture::kQwen2);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.head_dim, 8);  // 32 / 4
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
}

// Proves Llama's attention_bias biases q/k/v and o, and mlp_bias the MLP.
TEST(ModelConfig, LlamaBiasFlags) {
  json j = test::tiny_config_json("LlamaForCausalLM");
  j["attention_bias"] = true;
  j["mlp_bias"] = true;
  const ModelConfig c = parse(j);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.o_bias);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_EQ(c.sliding_window, 0);
}

// Proves the per-architecture defaults of transformers' config classes for
// absent keys: Mistral 8 KV heads and a 4096 sliding window, Qwen3 head_dim 128,
// Llama KV heads = heads, untied embeddings, 1e-6 eps, theta 1e4; and that an
// explicit null num_key_value_heads means "as many as the query heads".
TEST(ModelConfig, ArchitectureDefaults) {
  json m = test::tiny_config_json("MistralForCausalLM");
  m.erase("num_key_value_heads");
  m.erase("rope_theta");
  m.erase("rms_norm_eps");
  m.erase("tie_word_embeddings");
  m["num_attention_heads"] = 8;
  ModelConfig c = parse(m);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  m["sliding_window"] = nullptr;
  EXPECT_EQ(parse(m).sliding_window, 0);
  m["sliding_window"] = 1024;
  EXPECT_EQ(parse(m).sliding_window, 1024);

  json q = test::tiny_config_json("Qwen3ForCausalLM");
  q.erase("head_dim");
  q["num_key_value_heads"] = nullptr;
  c = parse(q);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.n_kv_heads, 4);

  json l = test::tiny_config_json("LlamaForCausalLM");
  l.erase("num_key_value_heads");
  l.erase("max_position_embeddings");
  c = parse(l);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.max_position, 2048);

  // No architectures list: model_type decides.
  json t = test::tiny_config_json("LlamaForCausalLM");
  t.erase("architectures");
  t["model_type"] = "mistral";
  EXPECT_EQ(parse(t).arch, Architecture::kMistral);
}

// Proves linear scaling in the older rope_scaling style with the "type" key.
TEST(ModelConfig, RopeLinear) {
  json j = test::tiny_config_json("LlamaForCausalLM");
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.rope.type, RopeType::kLinear);
  EXPECT_DOUBLE_EQ(c.rope.factor, 2.0);
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);  // top-level rope_theta still applies
}

// Proves llama3 parameters in transformers-5 rope_parameters (theta inside the
// dict wins over the top level) and the original context defaulting to
// max_position_embeddings.
TEST(ModelConfig, RopeLlama3) {
  json j = test::tiny_config_json("LlamaForCausalLM");
  j["rope_theta"] = 1234.0;
  j["rope_parameters"] = {{"rope_type", "llama3"},
                          {"rope_theta", 500000.0},
                          {"factor", 32.0},
                          {"low_freq_factor", 1.5},
                          {"high_freq_factor", 6.0}};
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.rope.type, RopeType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope.theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rope.factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope.low_freq_factor, 1.5);
  EXPECT_DOUBLE_EQ(c.rope.high_freq_factor, 6.0);
  EXPECT_EQ(c.rope.original_max_position, 256);
}

// Proves every yarn field is read (factor, original context, betas,
// attention_factor, mscale pair, truncate), that 0/null betas mean the 32/1
// defaults, that a null factor is max / original, and that a top-level
// original_max_position_embeddings wins over the dict's.
TEST(ModelConfig, RopeYarn) {
  json j = test::tiny_config_json("Qwen3ForCausalLM");
  j["max_position_embeddings"] = 131072;
  j["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", 4.0},         {"original_max_position_embeddings", 32768},
      {"beta_fast", 16},     {"beta_slow", 2},        {"attention_factor", 1.25},
      {"mscale", 0.707},     {"mscale_all_dim", 1.0}, {"truncate", false}};
  ModelConfig c = parse(j);
  EXPECT_EQ(c.rope.type, RopeType::kYarn);
  EXPECT_DOUBLE_EQ(c.rope.factor, 4.0);
  EXPECT_EQ(c.rope.original_max_position, 32768);
  EXPECT_DOUBLE_EQ(c.rope.beta_fast, 16.0);
  EXPECT_DOUBLE_EQ(c.rope.beta_slow, 2.0);
  ASSERT_TRUE(c.rope.attention_factor.has_value());
  EXPECT_DOUBLE_EQ(*c.rope.attention_factor, 1.25);
  EXPECT_DOUBLE_EQ(c.rope.mscale, 0.707);
  EXPECT_DOUBLE_EQ(c.rope.mscale_all_dim, 1.0);
  EXPECT_FALSE(c.rope.truncate);

  j["rope_scaling"] = {{"rope_type", "yarn"},
                       {"factor", nullptr},
                       {"original_max_position_embeddings", 16384},
                       {"beta_fast", 0},
                       {"beta_slow", nullptr}};
  c = parse(j);
  EXPECT_DOUBLE_EQ(c.rope.factor, 8.0);  // 131072 / 16384
  EXPECT_DOUBLE_EQ(c.rope.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.rope.beta_slow, 1.0);
  EXPECT_FALSE(c.rope.attention_factor.has_value());
  EXPECT_TRUE(c.rope.truncate);

  j["original_max_position_embeddings"] = 65536;
  EXPECT_EQ(parse(j).rope.original_max_position, 65536);
}

// Proves partial_rotary_factor is read from the top level or the rope dict
// and shrinks the rotary dimension.
TEST(ModelConfig, PartialRotary) {
  json j = test::tiny_config_json("LlamaForCausalLM");
  j["hidden_size"] = 64;  // head_dim 16
  j["partial_rotary_factor"] = 0.5;
  ModelConfig c = parse(j);
  EXPECT_DOUBLE_EQ(c.rope.partial_rotary_factor, 0.5);
  EXPECT_EQ(c.rotary_dim(), 8);
  j.erase("partial_rotary_factor");
  j["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0.25}};
  EXPECT_EQ(parse(j).rotary_dim(), 4);
}

// Proves eos_token_id may be a single id, a list, or null.
TEST(ModelConfig, EosForms) {
  json j = test::tiny_config_json("LlamaForCausalLM");
  j["eos_token_id"] = json::array({7, 9});
  ModelConfig c = parse(j);
  EXPECT_EQ(c.eos_token_id, 7);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{7, 9}));
  j["eos_token_id"] = nullptr;
  c = parse(j);
  EXPECT_EQ(c.eos_token_id, -1);
  EXPECT_TRUE(c.eos_token_ids.empty());
}

// Proves malformed files and missing or absurd fields give FORMAT naming the
// file and the field.
TEST(ModelConfig, FormatErrors) {
  expect_error([] { parse_model_config("{\"vocab_size\": ", "dir/config.json"); }, VEGAS_ERR_FORMAT,
               {"dir/config.json", "not valid JSON"});
  expect_error([] { parse_model_config("[1, 2]", "dir/config.json"); }, VEGAS_ERR_FORMAT,
               {"dir/config.json", "object"});
  // 100,000 nested arrays (valid JSON): refused before anything recurses
  // over them (a copy of such a value overflowed the stack; issue P1).
  expect_error(
      [] {
        parse_model_config("{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}",
                           "dir/config.json");
      },
      VEGAS_ERR_FORMAT, {"dir/config.json", "nests deeper than 64"});

  const json base = test::tiny_config_json("LlamaForCausalLM");
  auto with = [&base](const char *key, const json &value) {
    json j = base;
    j[key] = value;
    return j;
  };
  auto without = [&base](const char *key) {
    json j = base;
    j.erase(key);
    return j;
  };
  expect_error([&] { parse(without("hidden_size")); }, VEGAS_ERR_FORMAT,
               {"test/config.json", "'hidden_size'", "missing"});
  expect_error([&] { parse(without("num_hidden_layers")); }, VEGAS_ERR_FORMAT,
               {"num_hidden_layers"});
  expect_error([&] { parse(with("vocab_size", 20'000'000)); }, VEGAS_ERR_FORMAT,
               {"'vocab_size'", "absurd"});
  expect_error([&] { parse(with("num_hidden_layers", 5000)); }, VEGAS_ERR_FORMAT,
               {"'num_hidden_layers'", "absurd"});
  expect_error([&] { parse(with("vocab_size", 1e30)); }, VEGAS_ERR_FORMAT, {"'vocab_size'"});
  expect_error([&] { parse(with("intermediate_size", 0)); }, VEGAS_ERR_FORMAT,
               {"'intermediate_size'", ">= 1"});
  expect_error([&] { parse(with("hidden_size", -32)); }, VEGAS_ERR_FORMAT, {"'hidden_size'"});
  expect_error([&] { parse(with("hidden_size", "32")); }, VEGAS_ERR_FORMAT,
               {"'hidden_size'", "integer"});
  expect_error([&] { parse(with("hidden_size", 2.5)); }, VEGAS_ERR_FORMAT, {"'hidden_size'"});
  expect_error([&] { parse(with("num_key_value_heads", 3)); }, VEGAS_ERR_FORMAT,
               {"num_attention_heads", "not a multiple", "num_key_value_heads"});
  expect_error([&] { parse(with("hidden_size", 30)); }, VEGAS_ERR_FORMAT,
               {"'hidden_size'", "not divisible"});
  expect_error([&] { parse(with("head_dim", 7)); }, VEGAS_ERR_FORMAT, {"rotary dimension"});
  expect_error([&] { parse(with("rms_norm_eps", 0)); }, VEGAS_ERR_FORMAT, {"'rms_norm_eps'"});
  expect_error([&] { parse(with("rope_theta", -5)); }, VEGAS_ERR_FORMAT, {"'rope_theta'"});
  expect_error([&] { parse(with("tie_word_embeddings", "yes")); }, VEGAS_ERR_FORMAT,
               {"'tie_word_embeddings'"});
  expect_error([&] { parse(with("eos_token_id", -3)); }, VEGAS_ERR_FORMAT, {"'eos_token_id'"});
  expect_error([&] { parse(with("architectures", json::array())); }, VEGAS_ERR_FORMAT,
               {"'architectures'"});
  expect_error([&] { parse(with("rope_scaling", 3)); }, VEGAS_ERR_FORMAT, {"'rope_scaling'"});
  expect_error([&] { parse(with("partial_rotary_factor", 1.5)); }, VEGAS_ERR_FORMAT,
               {"'partial_rotary_factor'"});
  expect_error(
      [&] {
        parse(with("rope_scaling",
                   {{"rope_type", "llama3"}, {"factor", 8.0}, {"high_freq_factor", 4.0}}));
      },
      VEGAS_ERR_FORMAT, {"'rope_scaling.low_freq_factor'", "missing"});
  expect_error(
      [&] {
        parse(with("rope_scaling", {{"rope_type", "llama3"},
                                    {"factor", 8.0},
                                    {"low_freq_factor", 4.0},
                                    {"high_freq_factor", 4.0}}));
      },
      VEGAS_ERR_FORMAT, {"high_freq_factor"});
  expect_error(
      [&] {
        parse(with("rope_scaling", {{"type", "linear"}}));
      },
      VEGAS_ERR_FORMAT, {"'rope_scaling.factor'"});
  expect_error(
      [&] {
        parse(with("rope_scaling", {{"type", "yarn"}, {"factor", -2.0}}));
      },
      VEGAS_ERR_FORMAT, {"'rope_scaling.factor'"});
}

// Proves unknown architectures, rope types, activations and sliding-window
// layouts are UNSUPPORTED, naming what was found.
TEST(ModelConfig, UnsupportedErrors) {
  json j = test::tiny_config_json("LlamaForCausalLM");
  j["architectures"] = {"GPTNeoXForCausalLM"};
  expect_error([&] { parse(j); }, VEGAS_ERR_UNSUPPORTED, {"GPTNeoXForCausalLM", "not supported"});
  j.erase("architectures");
  j["model_type"] = "gpt2";
  expect_error([&] { parse(j); }, VEGAS_ERR_UNSUPPORTED, {"gpt2"});

  j = test::tiny_config_json("LlamaForCausalLM");
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  expect_error([&] { parse(j); }, VEGAS_ERR_UNSUPPORTED, {"rope type 'dynamic'"});
  j["rope_scaling"] = {{"type", "longrope"}};
  expect_error([&] { parse(j); }, VEGAS_ERR_UNSUPPORTED, {"'longrope'"});

  j = test::tiny_config_json("LlamaForCausalLM");
  j["hidden_act"] = "gelu";
  expect_error([&] { parse(j); }, VEGAS_ERR_UNSUPPORTED, {"gelu"});

  j = test::tiny_config_json("Qwen2ForCausalLM");
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  expect_error([&] { parse(j); }, VEGAS_ERR_UNSUPPORTED, {"use_sliding_window"});
  j["use_sliding_window"] = false;  // the usual Qwen2 case: a window that is off
  EXPECT_NO_THROW(parse(j));
  j["layer_types"] = {"full_attention", "sliding_attention"};
  expect_error([&] { parse(j); }, VEGAS_ERR_UNSUPPORTED, {"sliding_attention"});
}

// Proves a missing config file is an IO error naming it.
TEST(ModelConfig, MissingFile) {
  test::TempDir dir;
  expect_error([&] { load_model_config(dir.file("config.json")); }, VEGAS_ERR_IO,
               {dir.file("config.json")});
}

}  // namespace
}  // namespace vegas
