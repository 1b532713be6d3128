// vegas_model_load on broken model directories: every defect comes back as a
// status plus a message naming the file/field/tensor at fault, never a crash.
// Each directory is a small valid Qwen3 checkpoint (the 22m model's tokenizer,
// random bf16 weights) with exactly one thing broken; the intact directory
// loads, so each failure is caused by the one defect.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "safetensors_writer.h"
#include "tiny_checkpoint.h"
#include "vegas.h"

namespace vegas::test {
namespace {

const std::string kModelDir = std::string(VEGAS_SOURCE_DIR) + "/models/vegas-code-22m";

nlohmann::json valid_config() {
  nlohmann::json c = tiny_config_json("Qwen3ForCausalLM");
  c["vocab_size"] = 8192;  // the tokenizer's vocabulary
  return c;
}

// A directory holding the 22m tokenizer and a tiny checkpoint of `config`.
void write_model_dir(const TempDir &dir, const nlohmann::json &config) {
  write_bytes(dir.file("tokenizer.json"), read_bytes(kModelDir + "/tokenizer.json"));
  write_bytes(dir.file("tokenizer_config.json"), read_bytes(kModelDir + "/tokenizer_config.json"));
  write_tiny_model(dir.path(), config);
}

struct LoadResult {
  vegas_status status;
  std::string message;
};

LoadResult load(const std::string &dir) {
  vegas_model_options options;
  vegas_model_options_init(&options);
  options.backend = VEGAS_BACKEND_CPU;
  options.n_threads = 1;
  vegas_model *model = nullptr;
  const vegas_status status = vegas_model_load(dir.c_str(), &options, &model);
  LoadResult r{status, vegas_last_error()};
  if (status != VEGAS_OK) {
    EXPECT_EQ(model, nullptr) << "a failed load must not hand out a model";
  }
  vegas_model_free(model);
  return r;
}

// Expects `want` and a message that mentions `needle`.
void expect_load_error(const std::string &dir, vegas_status want, const std::string &needle) {
  const LoadResult r = load(dir);
  EXPECT_EQ(r.status, want) << vegas_status_name(r.status) << ": " << r.message;
  EXPECT_NE(r.message.find(needle), std::string::npos)
      << "message \"" << r.message << "\" does not name " << needle;
}

// Proves the fixture itself is sound: the unbroken directory loads.
TEST(AbiLoadErrors, IntactTinyModelLoads) {
  TempDir dir;
  write_model_dir(dir, valid_config());
  const LoadResult r = load(dir.path());
  EXPECT_EQ(r.status, VEGAS_OK) << r.message;
}

// Proves a config.json without a mandatory field fails with FORMAT naming it.
TEST(AbiLoadErrors, ConfigMissingFields) {
  for (const char *field : {"hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                            "intermediate_size"}) {
    SCOPED_TRACE(field);
    TempDir dir;
    nlohmann::json c = valid_config();
    write_model_dir(dir, c);
    c.erase(field);
    write_bytes(dir.file("config.json"), c.dump());
    expect_load_error(dir.path(), VEGAS_ERR_FORMAT, field);
  }
}

// Proves absurd values (zero, negative, huge, wrong type, inconsistent) are
// refused with a message naming the field, before anything is allocated.
TEST(AbiLoadErrors, ConfigAbsurdFields) {
  struct Case {
    const char *field;
    nlohmann::json value;
  };
  const Case cases[] = {
      {"hidden_size", 0},
      {"hidden_size", -32},
      {"hidden_size", "32"},
      {"num_hidden_layers", -1},
      {"num_attention_heads", 0},
      {"num_attention_heads", 3},  // does not divide into the kv heads
      {"num_key_value_heads", 0},
      {"num_key_value_heads", 5},  // more kv heads than heads
      {"vocab_size", 0},
      {"vocab_size", 1e12},
      {"intermediate_size", -48},
      {"head_dim", 0},
      {"max_position_embeddings", -1},
      {"rms_norm_eps", -1.0},
      {"rope_theta", 0.0},
  };
  for (const Case &k : cases) {
    SCOPED_TRACE(std::string(k.field) + " = " + k.value.dump());
    TempDir dir;
    nlohmann::json c = valid_config();
    write_model_dir(dir, c);
    c[k.field] = k.value;
    write_bytes(dir.file("config.json"), c.dump());
    const LoadResult r = load(dir.path());
    EXPECT_TRUE(r.status == VEGAS_ERR_FORMAT || r.status == VEGAS_ERR_UNSUPPORTED)
        << vegas_status_name(r.status) << ": " << r.message;
    EXPECT_NE(r.message.find(k.field), std::string::npos)
        << "message \"" << r.message << "\" does not name " << k.field;
  }
}

// Proves config.json that is not JSON, or not an object, is a FORMAT error
// naming the file.
TEST(AbiLoadErrors, ConfigNotJson) {
  for (const char *text : {"", "{", "[1, 2]", "{\"hidden_size\": }", "\xff\xfe"}) {
    TempDir dir;
    write_model_dir(dir, valid_config());
    write_bytes(dir.file("config.json"), text);
    expect_load_error(dir.path(), VEGAS_ERR_FORMAT, "config.json");
  }
}

// Proves an architecture this build does not implement is UNSUPPORTED, named.
TEST(AbiLoadErrors, UnsupportedArchitecture) {
  TempDir dir;
  nlohmann::json c = valid_config();
  write_model_dir(dir, c);
  c["architectures"] = {"GPT2LMHeadModel"};
  write_bytes(dir.file("config.json"), c.dump());
  expect_load_error(dir.path(), VEGAS_ERR_UNSUPPORTED, "GPT2LMHeadModel");
}

// Proves a tokenizer.json of a kind not supported yet (another model type, a
// SentencePiece-style Metaspace pre-tokenizer, byte_fallback) leaves the model
// loadable: it has no tokenizer, vegas_model_tokenizer returns NULL with a
// message naming what is unsupported, and a session generates from token ids.
TEST(AbiLoadErrors, UnsupportedTokenizerLoadsWithoutOne) {
  struct Case {
    const char *what;
    std::function<void(nlohmann::json &)> edit;
  };
  const std::vector<Case> cases = {
      {"WordPiece", [](nlohmann::json &t) { t["model"]["type"] = "WordPiece"; }},
      {"Unigram", [](nlohmann::json &t) { t["model"]["type"] = "Unigram"; }},
      {"Metaspace",
       [](nlohmann::json &t) {
         t["pre_tokenizer"] = {{"type", "Metaspace"}};
       }},
      {"byte_fallback", [](nlohmann::json &t) { t["model"]["byte_fallback"] = true; }},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir;
    write_model_dir(dir, valid_config());
    nlohmann::json t = nlohmann::json::parse(read_bytes(dir.file("tokenizer.json")));
    c.edit(t);
    write_bytes(dir.file("tokenizer.json"), t.dump());
    vegas_model_options options;
    vegas_model_options_init(&options);
    options.backend = VEGAS_BACKEND_CPU;
    options.n_threads = 1;
    vegas_model *model = nullptr;
    ASSERT_EQ(vegas_model_load(dir.path().c_str(), &options, &model), VEGAS_OK)
        << vegas_last_error();
    EXPECT_EQ(vegas_model_tokenizer(model), nullptr);
    const std::string message = vegas_last_error();
    EXPECT_NE(message.find(c.what), std::string::npos) << message;
    EXPECT_NE(message.find("token ids"), std::string::npos) << message;

    vegas_session *session = nullptr;
    ASSERT_EQ(vegas_session_create(model, nullptr, &session), VEGAS_OK) << vegas_last_error();
    const int32_t prompt[3] = {1, 2, 3};
    vegas_request request;
    vegas_request_init(&request);
    request.prompt = prompt;
    request.n_prompt = 3;
    request.max_tokens = 4;
    request.ignore_eos = 1;
    int32_t seq = -1;
    ASSERT_EQ(vegas_session_submit(session, &request, &seq), VEGAS_OK) << vegas_last_error();
    ASSERT_EQ(vegas_session_run(session), VEGAS_OK) << vegas_last_error();
    int32_t tokens[16];
    size_t n = 0;
    ASSERT_EQ(vegas_sequence_tokens(session, seq, tokens, 16, &n), VEGAS_OK) << vegas_last_error();
    EXPECT_EQ(n, 4u);
    vegas_session_free(session);
    vegas_model_free(model);
  }
}

// The tiny checkpoint's tensors and header, for tests that break the header.
struct Checkpoint {
  std::vector<FakeTensor> tensors;
  nlohmann::json header;
};

Checkpoint tiny_checkpoint() {
  const nlohmann::json config = valid_config();
  const ModelConfig c = parse_model_config(config.dump(), "config.json");
  Checkpoint k{tiny_model_tensors(c, 1), {}};
  k.header = header_of(k.tensors);
  return k;
}

// Proves two tensors sharing bytes are refused (FORMAT, naming a tensor).
TEST(AbiLoadErrors, OverlappingTensorOffsets) {
  TempDir dir;
  write_model_dir(dir, valid_config());
  Checkpoint k = tiny_checkpoint();
  // The second tensor starts inside the first one (same size, shifted by 2 bytes).
  const std::string second = k.tensors[1].name;
  const uint64_t begin = k.header[second]["data_offsets"][0].get<uint64_t>();
  const uint64_t end = k.header[second]["data_offsets"][1].get<uint64_t>();
  k.header[second]["data_offsets"] = {begin - 2, end - 2};
  write_safetensors(dir.file("model.safetensors"), k.header, data_of(k.tensors));
  const LoadResult r = load(dir.path());
  EXPECT_EQ(r.status, VEGAS_ERR_FORMAT) << vegas_status_name(r.status) << ": " << r.message;
  EXPECT_NE(r.message.find("model.safetensors"), std::string::npos) << r.message;
}

// Proves tensor offsets past the end of the file, and offsets that do not
// match shape x dtype size, are refused with FORMAT naming the tensor.
TEST(AbiLoadErrors, TensorOffsetsOutOfFileOrWrongSize) {
  const Checkpoint base = tiny_checkpoint();
  const std::string last = base.tensors.back().name;
  const uint64_t begin = base.header[last]["data_offsets"][0].get<uint64_t>();
  const uint64_t end = base.header[last]["data_offsets"][1].get<uint64_t>();
  const nlohmann::json broken_offsets[] = {
      {begin + 64, end + 64},              // runs past the end of the file
      {begin, end + (uint64_t{1} << 40)},  // a terabyte tensor
      {end, begin},                        // reversed
      {begin, end - 2},                    // one bf16 element short
      {UINT64_MAX - 1, UINT64_MAX},        // offset arithmetic would overflow
  };
  for (const nlohmann::json &offsets : broken_offsets) {
    SCOPED_TRACE(offsets.dump());
    TempDir dir;
    write_model_dir(dir, valid_config());
    Checkpoint k = base;
    k.header[last]["data_offsets"] = offsets;
    write_safetensors(dir.file("model.safetensors"), k.header, data_of(k.tensors));
    expect_load_error(dir.path(), VEGAS_ERR_FORMAT, last);
  }
}

// Proves a dtype whose element size disagrees with the stored bytes is FORMAT.
TEST(AbiLoadErrors, WrongDtypeSize) {
  TempDir dir;
  write_model_dir(dir, valid_config());
  Checkpoint k = tiny_checkpoint();
  const std::string first = k.tensors[0].name;
  k.header[first]["dtype"] = "F32";  // the bytes are bf16: half the size F32 needs
  write_safetensors(dir.file("model.safetensors"), k.header, data_of(k.tensors));
  expect_load_error(dir.path(), VEGAS_ERR_FORMAT, first);
}

}  // namespace
}  // namespace vegas::test
