// GGML tensor types (runtime/gguf/ggml_types.h): the type table's block
// geometry and the dequantization of every type libvegas reads, checked
// against tests/fixtures/gguf/quant_blocks.{json,bin}, the `gguf` Python
// package's output on random blocks (tools/make_gguf_quant_fixture.py).
//
// Tolerance: none; the comparison is of float32 bit patterns. gguf-py
// dequantizes every one of these types in float32, in llama.cpp's order (e.g.
// Q4_K: (d*sc)*q - dmin*m); fp16/bf16 -> float is exact, every product of an
// fp16 scale, a sub-scale and a quant fits float32's 24 bits exactly, so each
// value is rounded at most once (the final add), whatever the order or FMA use.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "gguf/ggml_types.h"

namespace vegas::gguf {
namespace {

using nlohmann::json;

std::string fixture_dir() {
  if (const char *env = std::getenv("VEGAS_FIXTURES_DIR"); env && *env)
    return std::string(env) + "/gguf";
  if (const char *env = std::getenv("VEGAS_SOURCE_DIR"); env && *env)
    return std::string(env) + "/tests/fixtures/gguf";
  return std::string(VEGAS_SOURCE_DIR) + "/tests/fixtures/gguf";
}

std::vector<uint8_t> read_bytes(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f) << "cannot open " << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

struct Fixture {
  json meta;
  std::vector<uint8_t> bin;
};

const Fixture &fixture() {
  static const Fixture fx = [] {
    Fixture f;
    std::ifstream in(fixture_dir() + "/quant_blocks.json");
    EXPECT_TRUE(in) << "cannot open " << fixture_dir() << "/quant_blocks.json";
    if (in) f.meta = json::parse(in);
    if (f.meta.contains("bin"))
      f.bin = read_bytes(fixture_dir() + "/" + f.meta["bin"].get<std::string>());
    return f;
  }();
  return fx;
}

void expect_error(const std::function<void()> &fn, vegas_status status, const std::string &needle) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message '" << e.what() << "' lacks '" << needle << "'";
  }
}

// Proves dequantize() reproduces gguf-py's float32 output bit for bit for
// every dequantizable type (F32, F16, BF16, Q4_0/1, Q5_0/1, Q8_0, Q4/5/6_K).
TEST(GgmlTypes, DequantizeMatchesGgufPy) {
  const Fixture &fx = fixture();
  ASSERT_TRUE(fx.meta.contains("types"));
  ASSERT_EQ(fx.bin.size(), fx.meta["bin_bytes"].get<size_t>());
  std::set<std::string> seen;
  for (const json &t : fx.meta["types"]) {
    const std::string name = t["name"];
    SCOPED_TRACE(name);
    const auto type = t["type"].get<uint32_t>();
    const auto n = t["n_values"].get<int64_t>();
    const auto data_offset = t["data_offset"].get<size_t>();
    const auto expected_offset = t["expected_offset"].get<size_t>();
    const GgmlTypeInfo *info = ggml_type_info(type);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(name, info->name);
    EXPECT_TRUE(info->dequantizable);
    ASSERT_EQ(t["data_bytes"].get<int64_t>(), n / info->block_elems * info->block_bytes);
    ASSERT_LE(expected_offset + n * sizeof(float), fx.bin.size());

    // An unaligned copy of the blocks: GGUF data need not be aligned for the
    // fp16/u32 fields, and the fixture's offsets are arbitrary.
    std::vector<uint8_t> raw(t["data_bytes"].get<size_t>() + 1);
    std::memcpy(raw.data() + 1, fx.bin.data() + data_offset, raw.size() - 1);
    std::vector<float> out(static_cast<size_t>(n), -1.0f);
    dequantize(type, raw.data() + 1, n, out.data());

    std::vector<uint32_t> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    std::memcpy(want.data(), fx.bin.data() + expected_offset, n * sizeof(float));
    std::memcpy(got.data(), out.data(), n * sizeof(float));
    int64_t mismatches = 0, first = -1;
    for (int64_t i = 0; i < n; ++i)
      if (got[i] != want[i] && mismatches++ == 0) first = i;
    if (mismatches) {
      float w, g;
      std::memcpy(&w, &want[first], sizeof w);
      std::memcpy(&g, &got[first], sizeof g);
      ADD_FAILURE() << mismatches << " of " << n << " values differ; first at " << first
                    << " (block " << first / info->block_elems << "): got " << g << " (0x"
                    << std::hex << got[first] << "), gguf-py " << w << " (0x" << want[first] << ")"
                    << std::dec;
    }
    seen.insert(name);
  }
  for (const char *want :
       {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"})
    EXPECT_EQ(seen.count(want), 1u) << want << " missing from the fixture";
}

// Proves the type table's name and block geometry equal gguf-py's
// GGML_QUANT_SIZES for every type id it lists, and that ids it does not list
// (including the removed 4, 5, 31..33, 36..38) are unknown (nullptr).
TEST(GgmlTypes, TableMatchesGgmlQuantSizes) {
  const Fixture &fx = fixture();
  ASSERT_TRUE(fx.meta.contains("quant_sizes"));
  std::set<uint32_t> listed;
  for (const json &s : fx.meta["quant_sizes"]) {
    const auto type = s["type"].get<uint32_t>();
    const std::string name = s["name"];
    SCOPED_TRACE(name);
    listed.insert(type);
    const GgmlTypeInfo *info = ggml_type_info(type);
    ASSERT_NE(info, nullptr) << "type " << type << " unknown";
    EXPECT_EQ(name, info->name);
    EXPECT_EQ(info->block_elems, s["block_elems"].get<int32_t>());
    EXPECT_EQ(info->block_bytes, s["block_bytes"].get<int32_t>());
  }
  EXPECT_GE(listed.size(), 32u);
  for (uint32_t id = 0; id < 256; ++id)
    if (!listed.count(id)) {
      EXPECT_EQ(ggml_type_info(id), nullptr) << "id " << id;
    }
  for (uint32_t id : {4u, 5u, 31u, 36u, 1000u, 0xffffffffu}) EXPECT_EQ(ggml_type_info(id), nullptr);
}

// Proves dequantize() refuses, with a vegas::Error of the right status, a
// known type it cannot read, an unknown id, and a count that is not a whole
// number of blocks.
TEST(GgmlTypes, DequantizeRefusals) {
  std::vector<uint8_t> data(1024, 0);
  std::vector<float> out(1024);
  expect_error([&] { dequantize(kGgmlQ2_K, data.data(), 256, out.data()); }, VEGAS_ERR_UNSUPPORTED,
               "Q2_K");
  expect_error([&] { dequantize(16 /* IQ2_XXS */, data.data(), 256, out.data()); },
               VEGAS_ERR_UNSUPPORTED, "IQ2_XXS");
  expect_error([&] { dequantize(4, data.data(), 32, out.data()); }, VEGAS_ERR_UNSUPPORTED, "4");
  expect_error([&] { dequantize(kGgmlQ4_0, data.data(), 33, out.data()); }, VEGAS_ERR_INTERNAL,
               "Q4_0");
  expect_error([&] { dequantize(kGgmlQ6_K, data.data(), 128, out.data()); }, VEGAS_ERR_INTERNAL,
               "Q6_K");
  expect_error([&] { dequantize(kGgmlQ8_0, data.data(), -32, out.data()); }, VEGAS_ERR_INTERNAL,
               "Q8_0");
}

}  // namespace
}  // namespace vegas::gguf
