// safetensors loading: the embedded checkpoint, dtype conversion, directory
// layouts (single file, sharded with an index), and every rejection path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "common/bf16.h"
#include "common/error.h"
#include "model/weight_store.h"
#include "safetensors_writer.h"
#include "support/model_dir.h"

namespace vegas {
namespace {

using nlohmann::json;
using test::FakeTensor;
using test::TempDir;

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

// Three small tensors of the three supported dtypes.
std::vector<FakeTensor> sample_tensors() {
  return {test::f32_tensor("a.f32", {2, 3}, {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, -7.0f}),
          // f16 bits: 1.0, -2.0, 65504 (max), 2^-24 (smallest subnormal)
          test::f16_tensor("b.f16", {4}, {0x3c00, 0xc000, 0x7bff, 0x0001}),
          test::bf16_tensor("c.bf16", {3}, {0.5f, -1.75f, 3.0e38f})};
}

// Proves the embedded model's checkpoint maps with all 90 tensors, and that
// element values read through the mapping equal the bytes read independently
// from the file with ordinary I/O.
TEST(WeightStore, EmbeddedModel) {
  const std::string dir = model_dir();
  auto store = WeightStore::open(dir);
  EXPECT_EQ(store->tensors().size(), 90u);
  const TensorView *embed = store->find("model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->dtype, DType::kBF16);
  EXPECT_EQ(embed->shape, (std::vector<int64_t>{8192, 512}));
  EXPECT_EQ(embed->nbytes, 8192u * 512u * 2u);
  EXPECT_EQ(store->find("lm_head.weight"), nullptr);  // tied

  // Independent read with plain file I/O: length prefix, header, then the bytes.
  std::ifstream in(dir + "/model.safetensors", std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char *>(&n), 8);
  std::string header_text(n, '\0');
  in.read(header_text.data(), static_cast<std::streamsize>(n));
  const json header = json::parse(header_text);
  const std::string name = "model.layers.3.self_attn.q_norm.weight";
  const uint64_t begin = header[name]["data_offsets"][0];
  std::vector<uint16_t> raw(64);
  in.seekg(static_cast<std::streamoff>(8 + n + begin));
  in.read(reinterpret_cast<char *>(raw.data()), 128);
  ASSERT_TRUE(in.good());
  const TensorView &t = store->require(name, {64});
  std::vector<float> all(64);
  t.to_f32(all.data());
  for (int i = 0; i < 64; ++i) {
    const float expected = bf16_to_f32(raw[static_cast<size_t>(i)]);
    EXPECT_EQ(all[static_cast<size_t>(i)], expected) << i;
    EXPECT_EQ(t.at(i), expected) << i;
  }
  EXPECT_GT(store->total_bytes(), 40u << 20);
}

// Proves F32/F16/BF16 convert exactly (incl. f16 max and subnormal), that
// __metadata__ is not a tensor, and that at() rejects an out-of-range index.
TEST(WeightStore, DtypesRoundTrip) {
  TempDir dir;
  test::write_safetensors(dir.file("m.safetensors"), sample_tensors());
  auto store = WeightStore::open_file(dir.file("m.safetensors"));
  EXPECT_EQ(store->tensors().size(), 3u);
  EXPECT_EQ(store->find("__metadata__"), nullptr);

  const TensorView &a = store->require("a.f32", {2, 3});
  EXPECT_EQ(a.dtype, DType::kF32);
  const float expect_a[] = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, -7.0f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a.at(i), expect_a[i]);

  const TensorView &b = store->require("b.f16", {4});
  std::vector<float> bv(4);
  b.to_f32(bv.data());
  EXPECT_EQ(bv[0], 1.0f);
  EXPECT_EQ(bv[1], -2.0f);
  EXPECT_EQ(bv[2], 65504.0f);
  EXPECT_EQ(bv[3], std::ldexp(1.0f, -24));

  const TensorView &c = store->require("c.bf16", {3});
  EXPECT_EQ(c.at(0), 0.5f);
  EXPECT_EQ(c.at(1), -1.75f);
  EXPECT_NEAR(c.at(2), 3.0e38f, 3.0e38f / 128);  // bf16 keeps 8 bits of mantissa
  EXPECT_STREQ(dtype_name(c.dtype), "BF16");
  expect_error([&] { c.at(3); }, VEGAS_ERR_INVALID_ARGUMENT, {"c.bf16"});
  expect_error([&] { c.at(-1); }, VEGAS_ERR_INVALID_ARGUMENT, {"c.bf16"});
}

// Proves require() names the tensor and both shapes, or says it is missing.
TEST(WeightStore, RequireErrors) {
  TempDir dir;
  test::write_safetensors(dir.file("m.safetensors"), sample_tensors());
  auto store = WeightStore::open_file(dir.file("m.safetensors"));
  expect_error(
      [&] {
        store->require("a.f32", {3, 2});
      },
      VEGAS_ERR_FORMAT, {"a.f32", "[2, 3]", "expected [3, 2]"});
  expect_error([&] { store->require("nope", {1}); }, VEGAS_ERR_FORMAT, {"missing tensor nope"});
}

// Writes sample_tensors() with a header edited by `edit` and expects the open
// to fail with `status` and all `needles` (plus the file name).
void expect_broken(const std::function<void(json &)> &edit, vegas_status status,
                   std::initializer_list<std::string> needles) {
  TempDir dir;
  const auto tensors = sample_tensors();
  json header = test::header_of(tensors);
  edit(header);
  const std::string path = dir.file("broken.safetensors");
  test::write_safetensors(path, header, test::data_of(tensors));
  expect_error([&] { WeightStore::open_file(path); }, status, needles);
  expect_error([&] { WeightStore::open_file(path); }, status, {path});
}

// Proves every header inconsistency is FORMAT naming the tensor and the fault,
// and an unsupported dtype is UNSUPPORTED naming tensor and dtype.
TEST(WeightStore, HeaderErrors) {
  expect_broken(
      [](json &h) {
        h["a.f32"]["data_offsets"] = {0, 40};
      },
      VEGAS_ERR_FORMAT, {"a.f32", "span 40 bytes", "needs 24"});  // wrong dtype size / shape
  expect_broken([](json &h) { h["b.f16"]["dtype"] = "F32"; }, VEGAS_ERR_FORMAT,
                {"b.f16", "needs 16"});
  expect_broken(
      [](json &h) {
        h["b.f16"]["data_offsets"] = {20, 28};
      },
      VEGAS_ERR_FORMAT, {"a.f32", "b.f16", "overlap"});
  expect_broken(
      [](json &h) {
        h["c.bf16"]["data_offsets"] = {1000, 1006};
      },
      VEGAS_ERR_FORMAT, {"c.bf16", "past the end of the data"});
  expect_broken(
      [](json &h) {
        h["c.bf16"]["data_offsets"] = {38, 32};
      },
      VEGAS_ERR_FORMAT, {"c.bf16", "end before"});
  expect_broken([](json &h) { h["c.bf16"]["data_offsets"] = {32}; }, VEGAS_ERR_FORMAT,
                {"c.bf16", "data_offsets"});
  expect_broken(
      [](json &h) {
        h["c.bf16"]["data_offsets"] = {-2, 4};
      },
      VEGAS_ERR_FORMAT, {"c.bf16", "data_offsets"});
  expect_broken([](json &h) { h["a.f32"]["dtype"] = "I64"; }, VEGAS_ERR_UNSUPPORTED,
                {"a.f32", "I64"});
  expect_broken([](json &h) { h["a.f32"]["dtype"] = "Q4_K"; }, VEGAS_ERR_UNSUPPORTED,
                {"a.f32", "Q4_K"});
  expect_broken([](json &h) { h["a.f32"].erase("dtype"); }, VEGAS_ERR_FORMAT, {"a.f32", "dtype"});
  expect_broken(
      [](json &h) {
        h["a.f32"]["shape"] = {2, -3};
      },
      VEGAS_ERR_FORMAT, {"a.f32", "negative"});
  expect_broken([](json &h) { h["a.f32"]["shape"] = "2x3"; }, VEGAS_ERR_FORMAT, {"a.f32", "shape"});
  // 2^30 * 2^30 * 2^30 elements: the byte count would overflow 64 bits.
  expect_broken(
      [](json &h) {
        h["a.f32"]["shape"] = {1 << 30, 1 << 30, 1 << 30};
      },
      VEGAS_ERR_FORMAT, {"a.f32", "absurd"});
  expect_broken([](json &h) { h["a.f32"]["shape"] = {uint64_t{1} << 63}; }, VEGAS_ERR_FORMAT,
                {"a.f32", "absurd"});
  expect_broken([](json &h) { h["a.f32"] = 5; }, VEGAS_ERR_FORMAT, {"a.f32", "not an object"});
}

// Proves damage to the framing itself is FORMAT naming the file: too short for
// the length prefix, a length past the end, a header that is not JSON or not an
// object, and a file cut off inside the data.
TEST(WeightStore, FramingErrors) {
  TempDir dir;
  const std::string path = dir.file("f.safetensors");
  test::write_bytes(path, "abc");
  expect_error([&] { WeightStore::open_file(path); }, VEGAS_ERR_FORMAT, {path, "too short"});

  test::write_bytes(path, test::frame(1000, "{}", ""));
  expect_error([&] { WeightStore::open_file(path); }, VEGAS_ERR_FORMAT,
               {path, "header length 1000", "past the end"});
  test::write_bytes(path, test::frame(~uint64_t{0}, "{}", ""));
  expect_error([&] { WeightStore::open_file(path); }, VEGAS_ERR_FORMAT, {path, "past the end"});

  test::write_bytes(path, test::frame(9, "{\"a\": [1,", ""));
  expect_error([&] { WeightStore::open_file(path); }, VEGAS_ERR_FORMAT, {path, "not valid JSON"});
  test::write_bytes(path, test::frame(5, "[1,2]", ""));
  expect_error([&] { WeightStore::open_file(path); }, VEGAS_ERR_FORMAT,
               {path, "not a JSON object"});

  // A whole file, truncated in the middle of the last tensor.
  test::write_safetensors(path, sample_tensors());
  std::string whole = test::read_bytes(path);
  test::write_bytes(path, whole.substr(0, whole.size() - 3));
  expect_error([&] { WeightStore::open_file(path); }, VEGAS_ERR_FORMAT,
               {path, "c.bf16", "past the end of the data"});

  // An empty file and a missing one.
  test::write_bytes(path, "");
  expect_error([&] { WeightStore::open_file(path); }, VEGAS_ERR_FORMAT, {path, "too short"});
  expect_error([&] { WeightStore::open_file(dir.file("absent.safetensors")); }, VEGAS_ERR_IO,
               {"absent.safetensors"});
}

// Proves that randomly corrupted files (bytes of the length prefix and header
// overwritten, or the file cut short) either load or fail with vegas::Error,
// never with another exception or a crash; every tensor of a file that loads
// is read end to end (an out-of-mapping view would fault, or trip ASan).
TEST(WeightStore, RandomCorruptionIsContained) {
  TempDir dir;
  const std::string path = dir.file("fuzz.safetensors");
  test::write_safetensors(path, sample_tensors());
  const std::string good = test::read_bytes(path);
  std::mt19937 rng(12345);
  int loaded = 0, rejected = 0;
  for (int round = 0; round < 300; ++round) {
    std::string bytes = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % std::min<size_t>(bytes.size(), 200);  // prefix + header
      bytes[at] = static_cast<char>(rng() % 2 ? rng() % 256 : "0123456789[]{},\":"[rng() % 16]);
    }
    if (rng() % 8 == 0) bytes.resize(rng() % bytes.size());
    test::write_bytes(path, bytes);
    try {
      auto store = WeightStore::open_file(path);
      for (const auto &kv : store->tensors()) {
        std::vector<float> out(static_cast<size_t>(kv.second.numel()));
        kv.second.to_f32(out.data());
      }
      ++loaded;
    } catch (const Error &) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_EQ(loaded + rejected, 300);
}

// Proves how open(dir) picks files: model.safetensors, else the single
// *.safetensors; none is IO, several without an index is FORMAT, and a missing
// directory is IO.
TEST(WeightStore, DirectoryLayouts) {
  {
    TempDir dir;
    test::write_safetensors(dir.file("weights.safetensors"), sample_tensors());
    EXPECT_EQ(WeightStore::open(dir.path())->tensors().size(), 3u);
    test::write_safetensors(dir.file("other.safetensors"), sample_tensors());
    expect_error([&] { WeightStore::open(dir.path()); }, VEGAS_ERR_FORMAT, {"several"});
    test::write_safetensors(dir.file("model.safetensors"), {sample_tensors()[0]});
    EXPECT_EQ(WeightStore::open(dir.path())->tensors().size(), 1u);  // model.safetensors wins
  }
  {
    TempDir dir;
    expect_error([&] { WeightStore::open(dir.path()); }, VEGAS_ERR_IO, {dir.path()});
  }
  expect_error([] { WeightStore::open("/nonexistent/vegas/dir"); }, VEGAS_ERR_IO,
               {"/nonexistent/vegas/dir"});
}

// A checkpoint split in two shards with an index, as transformers writes it.
struct Sharded {
  TempDir dir;
  json index;
  Sharded() {
    const auto tensors = sample_tensors();
    test::write_safetensors(dir.file("model-00001-of-00002.safetensors"), {tensors[0], tensors[1]});
    test::write_safetensors(dir.file("model-00002-of-00002.safetensors"), {tensors[2]});
    index = {{"metadata", {{"total_size", 46}}},
             {"weight_map",
              {{"a.f32", "model-00001-of-00002.safetensors"},
               {"b.f16", "model-00001-of-00002.safetensors"},
               {"c.bf16", "model-00002-of-00002.safetensors"}}}};
    write_index();
  }
  void write_index() const {
    test::write_bytes(dir.file("model.safetensors.index.json"), index.dump());
  }
};

// Proves a two-shard checkpoint loads every tensor with its values.
TEST(WeightStore, ShardedCheckpoint) {
  Sharded s;
  auto store = WeightStore::open(s.dir.path());
  EXPECT_EQ(store->tensors().size(), 3u);
  EXPECT_EQ(store->require("a.f32", {2, 3}).at(1), -2.5f);
  EXPECT_EQ(store->require("b.f16", {4}).at(2), 65504.0f);
  EXPECT_EQ(store->require("c.bf16", {3}).at(1), -1.75f);
}

// Proves shard faults: a missing shard is IO naming it; an index naming a
// tensor its shard lacks, a tensor in the wrong shard, a tensor in two shards,
// a path leaving the directory, and a broken index are FORMAT.
TEST(WeightStore, ShardErrors) {
  {
    Sharded s;
    std::remove(s.dir.file("model-00002-of-00002.safetensors").c_str());
    expect_error([&] { WeightStore::open(s.dir.path()); }, VEGAS_ERR_IO,
                 {"model-00002-of-00002.safetensors", "missing"});
  }
  {
    Sharded s;
    s.index["weight_map"]["ghost"] = "model-00002-of-00002.safetensors";
    s.write_index();
    expect_error([&] { WeightStore::open(s.dir.path()); }, VEGAS_ERR_FORMAT,
                 {"ghost", "model-00002-of-00002.safetensors"});
  }
  {
    Sharded s;
    s.index["weight_map"]["c.bf16"] = "model-00001-of-00002.safetensors";
    s.index["weight_map"]["x"] = "model-00002-of-00002.safetensors";
    s.write_index();
    expect_error([&] { WeightStore::open(s.dir.path()); }, VEGAS_ERR_FORMAT, {"c.bf16"});
  }
  {
    Sharded s;
    test::write_safetensors(s.dir.file("model-00002-of-00002.safetensors"),
                            {sample_tensors()[0], sample_tensors()[2]});
    expect_error([&] { WeightStore::open(s.dir.path()); }, VEGAS_ERR_FORMAT,
                 {"a.f32", "appears in both"});
  }
  {
    Sharded s;
    s.index["weight_map"]["c.bf16"] = "../model-00002-of-00002.safetensors";
    s.write_index();
    expect_error([&] { WeightStore::open(s.dir.path()); }, VEGAS_ERR_FORMAT,
                 {"c.bf16", "inside the directory"});
  }
  {
    Sharded s;
    test::write_bytes(s.dir.file("model.safetensors.index.json"), "{\"weight_map\": ");
    expect_error([&] { WeightStore::open(s.dir.path()); }, VEGAS_ERR_FORMAT,
                 {"model.safetensors.index.json", "not valid JSON"});
    test::write_bytes(s.dir.file("model.safetensors.index.json"), "{\"metadata\": {}}");
    expect_error([&] { WeightStore::open(s.dir.path()); }, VEGAS_ERR_FORMAT, {"weight_map"});
  }
}

}  // namespace
}  // namespace vegas
