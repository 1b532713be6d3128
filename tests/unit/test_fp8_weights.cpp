// FP8 checkpoints (model/fp8_weights.h). What it proves:
//   - F8_E4M3 decodes exactly (anchors across normals, subnormals, signs,
//     NaN);
//   - a checkpoint's F8 weights come out as bf16(fp8 * scale) for block
//     scales (NAME_scale_inv, partial last blocks included), per-tensor,
//     per-channel and per-group scales (NAME_scale), and the scale and
//     input-scale tensors are gone;
//   - the codes and a scale per 128 values of a row stay beside the bf16
//     values (for the CUDA FP8 GEMV) exactly where the scales repeat over
//     whole groups of 128 inputs, and nowhere else;
//   - an F8 tensor without a usable scale is a FORMAT error naming it, and a
//     config with another quantization method is UNSUPPORTED naming it;
//   - a tiny model stored as FP8 computes exactly what the same model with
//     the dequantized values as bf16 computes (CPU backend).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/bf16.h"
#include "common/error.h"
#include "model/fp8_weights.h"
#include "model/model_config.h"
#include "model/weight_store.h"
#include "safetensors_writer.h"
#include "support/golden.h"
#include "tiny_checkpoint.h"

namespace vegas {
namespace {

using test::FakeTensor;

TEST(Fp8Weights, E4M3DecodesExactly) {
  EXPECT_EQ(fp8_e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_f32(0x07), std::ldexp(7.0f, -9));  // largest subnormal
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x3f), 1.875f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);  // largest finite
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0xff)));
  EXPECT_EQ(fp8_e4m3_to_f32(0xb8), -1.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0xfe), -448.0f);
  EXPECT_TRUE(std::signbit(fp8_e4m3_to_f32(0x80)));
  for (int b = 1; b < 0x7f; ++b)  // positive codes increase
    EXPECT_LT(fp8_e4m3_to_f32(static_cast<uint8_t>(b - 1)),
              fp8_e4m3_to_f32(static_cast<uint8_t>(b)))
        << b;
}

// Random codes of an [n][k] weight, NaN excepted.
std::vector<uint8_t> random_codes(int64_t n, int64_t k, std::mt19937 &rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> codes(static_cast<size_t>(n * k));
  for (uint8_t &c : codes) {
    do c = static_cast<uint8_t>(byte(rng));
    while ((c & 0x7f) == 0x7f);
  }
  return codes;
}

FakeTensor fp8_tensor(const std::string &name, std::vector<int64_t> shape,
                      const std::vector<uint8_t> &codes) {
  return {name, "F8_E4M3", std::move(shape), std::string(codes.begin(), codes.end())};
}

std::vector<float> random_scales(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> u(1e-3f, 1e-1f);
  std::vector<float> s(n);
  for (float &x : s) x = u(rng);
  return s;
}

// Expects the store's `name` to be bf16(code * scale_of(row, col)).
template <typename ScaleOf>
void expect_dequantized(const WeightStore &store, const std::string &name,
                        const std::vector<uint8_t> &codes, int64_t k, ScaleOf scale_of) {
  const TensorView *t = store.find(name);
  ASSERT_NE(t, nullptr) << name;
  ASSERT_EQ(t->dtype, DType::kBF16) << name;
  const auto *bits = static_cast<const uint16_t *>(t->data);
  for (size_t i = 0; i < codes.size(); ++i) {
    const int64_t r = static_cast<int64_t>(i) / k, c = static_cast<int64_t>(i) % k;
    ASSERT_EQ(bits[i], f32_to_bf16(fp8_e4m3_to_f32(codes[i]) * scale_of(r, c)))
        << name << " value " << i;
  }
}

TEST(Fp8Weights, CheckpointWeightsBecomeBf16OfCodeTimesScale) {
  std::mt19937 rng(3);
  // Block scales over 128 x 128 with partial last blocks: [260][300] -> [3][3].
  const std::vector<uint8_t> a = random_codes(260, 300, rng), b = random_codes(64, 96, rng),
                             c = random_codes(64, 96, rng), d = random_codes(64, 96, rng);
  const std::vector<float> sa = random_scales(9, rng), sb = random_scales(64, rng),
                           sc = random_scales(1, rng), sd = random_scales(64 * 3, rng);
  test::TempDir dir;
  test::write_safetensors(
      dir.file("model.safetensors"),
      {fp8_tensor("a.weight", {260, 300}, a), test::f32_tensor("a.weight_scale_inv", {3, 3}, sa),
       fp8_tensor("b.weight", {64, 96}, b), test::f32_tensor("b.weight_scale", {64, 1}, sb),
       test::f32_tensor("b.input_scale", {}, {0.5f}), fp8_tensor("c.weight", {64, 96}, c),
       test::bf16_tensor("c.weight_scale", {}, sc), fp8_tensor("d.weight", {64, 96}, d),
       test::f32_tensor("d.weight_scale", {64, 3}, sd),
       test::f32_tensor("e.bias", {4}, {1, 2, 3, 4})});
  const auto store = WeightStore::open(dir.path());
  expect_dequantized(*store, "a.weight", a, 300,
                     [&](int64_t r, int64_t col) { return sa[size_t(r / 128 * 3 + col / 128)]; });
  expect_dequantized(*store, "b.weight", b, 96, [&](int64_t r, int64_t) { return sb[size_t(r)]; });
  const float tensor_scale = bf16_to_f32(f32_to_bf16(sc[0]));  // stored as bf16
  expect_dequantized(*store, "c.weight", c, 96, [&](int64_t, int64_t) { return tensor_scale; });
  expect_dequantized(*store, "d.weight", d, 96,
                     [&](int64_t r, int64_t col) { return sd[size_t(r * 3 + col / 32)]; });
  for (const char *gone : {"a.weight_scale_inv", "b.weight_scale", "b.input_scale",
                           "c.weight_scale", "d.weight_scale"})
    EXPECT_EQ(store->find(gone), nullptr) << gone;
  ASSERT_NE(store->find("e.bias"), nullptr);
  EXPECT_EQ(store->tensors().size(), 5u);
}

// Expects the store's `name` to keep its codes and, per 128 values of a row,
// scale_of(row, group) (or to keep nothing when `kept` is false).
template <typename ScaleOf>
void expect_codes_kept(const WeightStore &store, const std::string &name,
                       const std::vector<uint8_t> &codes, int64_t k, bool kept, ScaleOf scale_of) {
  const TensorView *t = store.find(name);
  ASSERT_NE(t, nullptr) << name;
  if (!kept) {
    EXPECT_EQ(t->fp8, nullptr) << name;
    EXPECT_EQ(t->fp8_scales, nullptr) << name;
    return;
  }
  ASSERT_NE(t->fp8, nullptr) << name;
  ASSERT_NE(t->fp8_scales, nullptr) << name;
  EXPECT_TRUE(std::equal(codes.begin(), codes.end(), t->fp8)) << name;
  const int64_t n = static_cast<int64_t>(codes.size()) / k;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < k / 128; ++g)
      ASSERT_EQ(t->fp8_scales[r * (k / 128) + g], scale_of(r, g)) << name << " " << r << "," << g;
}

TEST(Fp8Weights, CodesAndGroupScalesKeptWhereTheScalesFitGroupsOf128) {
  std::mt19937 rng(9);
  const std::vector<uint8_t> a = random_codes(130, 256, rng), b = random_codes(8, 384, rng),
                             c = random_codes(8, 256, rng), d = random_codes(8, 512, rng),
                             e = random_codes(8, 256, rng), f = random_codes(8, 200, rng);
  const std::vector<float> sa = random_scales(4, rng), sb = random_scales(8, rng),
                           sc = random_scales(1, rng), sd = random_scales(8 * 2, rng),
                           se = random_scales(8 * 4, rng), sf = random_scales(8, rng);
  test::TempDir dir;
  test::write_safetensors(
      dir.file("model.safetensors"),
      {fp8_tensor("a.weight", {130, 256}, a), test::f32_tensor("a.weight_scale_inv", {2, 2}, sa),
       fp8_tensor("b.weight", {8, 384}, b), test::f32_tensor("b.weight_scale", {8, 1}, sb),
       fp8_tensor("c.weight", {8, 256}, c), test::f32_tensor("c.weight_scale", {}, sc),
       fp8_tensor("d.weight", {8, 512}, d), test::f32_tensor("d.weight_scale", {8, 2}, sd),
       fp8_tensor("e.weight", {8, 256}, e), test::f32_tensor("e.weight_scale", {8, 4}, se),
       fp8_tensor("f.weight", {8, 200}, f), test::f32_tensor("f.weight_scale", {8, 1}, sf)});
  const auto store = WeightStore::open(dir.path());
  // 128 x 128 blocks (a partial last block of rows), per channel, per tensor,
  // groups of 256: kept.
  expect_codes_kept(*store, "a.weight", a, 256, true,
                    [&](int64_t r, int64_t g) { return sa[size_t(r / 128 * 2 + g)]; });
  expect_codes_kept(*store, "b.weight", b, 384, true,
                    [&](int64_t r, int64_t) { return sb[size_t(r)]; });
  expect_codes_kept(*store, "c.weight", c, 256, true, [&](int64_t, int64_t) { return sc[0]; });
  expect_codes_kept(*store, "d.weight", d, 512, true,
                    [&](int64_t r, int64_t g) { return sd[size_t(r * 2 + g / 2)]; });
  // Groups of 64 inputs, or rows of 200 values: not a scale per 128 values.
  expect_codes_kept(*store, "e.weight", e, 256, false, [](int64_t, int64_t) { return 0.0f; });
  expect_codes_kept(*store, "f.weight", f, 200, false, [](int64_t, int64_t) { return 0.0f; });
}

// Expects opening a checkpoint of `tensors` to fail with `status` and
// `needle` in the message.
void expect_open_error(const std::vector<FakeTensor> &tensors, vegas_status status,
                       const std::string &needle) {
  test::TempDir dir;
  test::write_safetensors(dir.file("model.safetensors"), tensors);
  try {
    WeightStore::open(dir.path());
    FAIL() << "no error; expected " << needle;
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Fp8Weights, UnusableScalesAreFormatErrors) {
  std::mt19937 rng(4);
  const std::vector<uint8_t> w = random_codes(64, 96, rng);
  expect_open_error({fp8_tensor("x.weight", {64, 96}, w)}, VEGAS_ERR_FORMAT,
                    "x.weight has no x.weight_scale");
  expect_open_error({fp8_tensor("x.weight", {64, 96}, w),
                     test::f32_tensor("x.weight_scale", {32}, random_scales(32, rng))},
                    VEGAS_ERR_FORMAT, "x.weight_scale of shape [32]");
  expect_open_error({fp8_tensor("x.weight", {64, 96}, w),
                     test::f32_tensor("x.weight_scale", {64, 5}, random_scales(320, rng))},
                    VEGAS_ERR_FORMAT, "neither per tensor");
  expect_open_error({fp8_tensor("x.weight", {64, 96}, w),
                     test::f32_tensor("x.weight_scale_inv", {3, 7}, random_scales(21, rng))},
                    VEGAS_ERR_FORMAT, "do not tile [64, 96]");
  expect_open_error({fp8_tensor("x.bias", {64, 96}, w)}, VEGAS_ERR_FORMAT, "not a 2-D weight");
  expect_open_error({fp8_tensor("x.weight", {6144}, w)}, VEGAS_ERR_FORMAT, "not a 2-D weight");
  expect_open_error({fp8_tensor("x.weight", {64, 96}, w), fp8_tensor("x.weight_scale", {}, {1})},
                    VEGAS_ERR_FORMAT, "FP8 too");
}

TEST(Fp8Weights, OtherQuantizationMethodsAreUnsupported) {
  nlohmann::json c = test::tiny_config_json("Qwen3ForCausalLM");
  for (const auto &[method, format] : std::vector<std::pair<std::string, std::string>>{
           {"gptq", ""}, {"awq", ""}, {"compressed-tensors", "pack-quantized"}}) {
    c["quantization_config"] = {{"quant_method", method}};
    if (!format.empty()) c["quantization_config"]["format"] = format;
    try {
      parse_model_config(c.dump(), "config.json");
      FAIL() << method << " accepted";
    } catch (const Error &e) {
      EXPECT_EQ(e.status(), VEGAS_ERR_UNSUPPORTED) << e.what();
      EXPECT_NE(std::string(e.what()).find(method), std::string::npos) << e.what();
    }
  }
  c["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  EXPECT_NO_THROW(parse_model_config(c.dump(), "config.json"));
  c["quantization_config"] = {{"quant_method", "compressed-tensors"},
                              {"format", "float-quantized"}};
  EXPECT_NO_THROW(parse_model_config(c.dump(), "config.json"));
}

// The nearest finite E4M3 code to x.
uint8_t nearest_code(float x) {
  uint8_t best = 0;
  for (int b = 0; b < 256; ++b) {
    const float v = fp8_e4m3_to_f32(static_cast<uint8_t>(b));
    if (!std::isnan(v) && std::fabs(v - x) < std::fabs(fp8_e4m3_to_f32(best) - x))
      best = static_cast<uint8_t>(b);
  }
  return best;
}

TEST(Fp8Weights, Fp8ModelComputesAsItsBf16Values) {
  nlohmann::json config = test::tiny_config_json("Qwen3ForCausalLM");
  const ModelConfig c = parse_model_config(config.dump(), "config.json");
  std::vector<FakeTensor> fp8, plain;
  for (const FakeTensor &t : test::tiny_model_tensors(c, 7)) {
    const bool linear = t.shape.size() == 2 && t.name.find("proj.weight") != std::string::npos;
    if (!linear) {
      fp8.push_back(t);
      plain.push_back(t);
      continue;
    }
    // Per output channel: scale = max |w| / 448, codes the nearest values.
    const int64_t n = t.shape[0], k = t.shape[1];
    const auto *bits = reinterpret_cast<const uint16_t *>(t.bytes.data());
    std::vector<uint8_t> codes(static_cast<size_t>(n * k));
    std::vector<float> scales(static_cast<size_t>(n)), values(codes.size());
    for (int64_t r = 0; r < n; ++r) {
      float amax = 0;
      for (int64_t i = 0; i < k; ++i)
        amax = std::max(amax, std::fabs(bf16_to_f32(bits[r * k + i])));
      scales[size_t(r)] = amax > 0 ? amax / 448.0f : 1.0f;
      for (int64_t i = 0; i < k; ++i) {
        const size_t at = size_t(r * k + i);
        codes[at] = nearest_code(bf16_to_f32(bits[at]) / scales[size_t(r)]);
        values[at] = fp8_e4m3_to_f32(codes[at]) * scales[size_t(r)];
      }
    }
    fp8.push_back(fp8_tensor(t.name, t.shape, codes));
    fp8.push_back(test::f32_tensor(t.name + "_scale", {n, 1}, scales));
    plain.push_back(test::bf16_tensor(t.name, t.shape, values));
  }
  config["quantization_config"] = {{"quant_method", "compressed-tensors"},
                                   {"format", "float-quantized"}};
  test::TempDir a, b;
  for (const auto *dir : {&a, &b}) test::write_bytes(dir->file("config.json"), config.dump());
  test::write_safetensors(a.file("model.safetensors"), fp8);
  test::write_safetensors(b.file("model.safetensors"), plain);
  golden::GoldenModel qa(a.path(), 64, 16, false), qb(b.path(), 64, 16, false);
  const std::vector<int32_t> prompt = {1, 5, 9, 17, 33, 2, 40, 63};
  const float *la = qa.forward(prompt.data(), 8, SeqRows::Logits::kAll);
  const std::vector<float> ya(la, la + 8 * c.vocab_size);
  const float *lb = qb.forward(prompt.data(), 8, SeqRows::Logits::kAll);
  for (size_t i = 0; i < ya.size(); ++i) ASSERT_EQ(ya[i], lb[i]) << "logit " << i;
}

}  // namespace
}  // namespace vegas
