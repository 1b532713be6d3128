// `vegas quantize --type fp8` (model/fp8_export.h). What it proves:
//   - f32_to_fp8_e4m3 is the nearest code, ties to even: every finite code
//     comes back as itself, midpoints go to the even neighbour, magnitudes
//     above 448 saturate, NaN stays NaN;
//   - the embedded model written as FP8 opens as an FP8 checkpoint: config
//     with Qwen's quantization_config, the tokenizer files as they were, every
//     other tensor bit for bit, each layer matrix within e4m3's rounding of
//     its block scale and kept in FP8 for the CUDA backend; its logits track
//     the original's (CPU backend);
//   - a non-empty or unwritable output and an unreadable model are IO errors
//     that leave no output, through the C ABI too (type names in any case).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "common/bf16.h"
#include "common/error.h"
#include "model/fp8_export.h"
#include "model/fp8_weights.h"
#include "model/model_config.h"
#include "model/weight_store.h"
#include "safetensors_writer.h"
#include "support/golden.h"
#include "support/model_dir.h"
#include "vegas.h"

namespace vegas {
namespace {

namespace fs = std::filesystem;

TEST(Fp8Export, F32ToE4M3IsTheNearestCodeTiesToEven) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    const uint8_t code = static_cast<uint8_t>(c);
    EXPECT_EQ(f32_to_fp8_e4m3(fp8_e4m3_to_f32(code)), code) << c;
  }
  for (int c = 0; c + 1 < 0x7f; ++c) {  // the midpoint of two neighbours: the even code
    const float mid = 0.5f * (fp8_e4m3_to_f32(static_cast<uint8_t>(c)) +
                              fp8_e4m3_to_f32(static_cast<uint8_t>(c + 1)));
    EXPECT_EQ(f32_to_fp8_e4m3(mid), c % 2 == 0 ? c : c + 1) << c;
    EXPECT_EQ(f32_to_fp8_e4m3(-mid), 0x80 | (c % 2 == 0 ? c : c + 1)) << c;
    EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(mid, 0.0f)), c) << c;
    EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(mid, 1e9f)), c + 1) << c;
  }
  EXPECT_EQ(f32_to_fp8_e4m3(1e6f), 0x7e);  // 448
  EXPECT_EQ(f32_to_fp8_e4m3(-1e6f), 0xfe);
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -11)), 0x00);  // below half the smallest subnormal
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(f32_to_fp8_e4m3(std::nanf("")))));
}

TEST(Fp8Export, EmbeddedModelWrittenAsFp8TracksTheOriginal) {
  const std::string src = test::embedded_model_dir();
  test::TempDir tmp;
  const std::string out = tmp.file("fp8");
  export_fp8(src, out);

  nlohmann::json config = nlohmann::json::parse(test::read_bytes(out + "/config.json"));
  EXPECT_EQ(config["quantization_config"]["quant_method"], "fp8");
  EXPECT_EQ(config["quantization_config"]["weight_block_size"], nlohmann::json({128, 128}));
  for (const char *f : {"tokenizer.json", "tokenizer_config.json"})
    EXPECT_EQ(test::read_bytes(out + "/" + f), test::read_bytes(src + "/" + f)) << f;

  const auto a = WeightStore::open(src), b = WeightStore::open(out);
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  int matrices = 0;
  for (const auto &[name, t] : a->tensors()) {
    const TensorView *u = b->find(name);
    ASSERT_NE(u, nullptr) << name;
    ASSERT_EQ(u->shape, t.shape) << name;
    const bool matrix = t.shape.size() == 2 && name.find("layers.") != std::string::npos &&
                        name.find("_proj.weight") != std::string::npos;
    if (!matrix) {
      ASSERT_EQ(u->dtype, t.dtype) << name;
      ASSERT_EQ(std::memcmp(u->data, t.data, t.nbytes), 0) << name;
      continue;
    }
    ++matrices;
    ASSERT_NE(u->fp8, nullptr) << name << " is not kept in FP8";
    std::vector<float> x(static_cast<size_t>(t.numel())), y(x.size());
    t.to_f32(x.data());
    u->to_f32(y.data());
    const int64_t k = t.shape[1];
    for (size_t i = 0; i < x.size(); ++i) {
      // e4m3 keeps 3 mantissa bits (half a step: 1/16 of the value), the
      // block scale's subnormal step 2^-9, and bf16 rounds the product.
      const float scale = u->fp8_scales[(static_cast<int64_t>(i) / k) * (k / 128) +
                                        (static_cast<int64_t>(i) % k) / 128];
      ASSERT_LE(std::fabs(y[i] - x[i]), std::fabs(x[i]) / 16 * 1.01f + std::fabs(y[i]) / 256 +
                                            scale * std::ldexp(1.0f, -10))
          << name << " value " << i;
    }
  }
  const ModelConfig c = load_model_config(src + "/config.json");
  EXPECT_EQ(matrices, 7 * c.n_layers);

  golden::GoldenModel ma(src, 64, 64, false), mb(out, 64, 64, false);
  std::vector<int32_t> prompt(48);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919 + 13) % 8000);
  const size_t n = prompt.size() * static_cast<size_t>(c.vocab_size);
  const float *la = ma.forward(prompt.data(), 48, SeqRows::Logits::kAll);
  const std::vector<float> ya(la, la + n);
  const float *lb = mb.forward(prompt.data(), 48, SeqRows::Logits::kAll);
  double err = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) {
    err += (double(lb[i]) - ya[i]) * (double(lb[i]) - ya[i]);
    ref += double(ya[i]) * ya[i];
  }
  EXPECT_LT(std::sqrt(err / ref), 0.05) << "logits' relative L2";
  std::cout << "[fp8] logits' relative L2 against the original: " << std::sqrt(err / ref) << "\n";
  EXPECT_GT(ref, 0.0);
}

TEST(Fp8Export, BadOutputOrModelIsAnIoErrorLeavingNoOutput) {
  test::TempDir tmp;
  const std::string src = test::embedded_model_dir();
  // A non-empty directory is left as it was.
  fs::create_directories(tmp.file("full"));
  tmp.write("full/keep.txt", "mine");
  try {
    export_fp8(src, tmp.file("full"));
    FAIL() << "wrote into a non-empty directory";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_IO) << e.what();
    EXPECT_NE(std::string(e.what()).find("not an empty directory"), std::string::npos);
  }
  EXPECT_EQ(test::read_bytes(tmp.file("full/keep.txt")), "mine");
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.file("full")), fs::directory_iterator()), 1);
  // A model that cannot be read: no output directory is left behind.
  try {
    export_fp8(tmp.file("no-such-model"), tmp.file("out"));
    FAIL() << "no error for a missing model";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_IO) << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp.file("out")));
  // Through the ABI, the type in any case.
  EXPECT_EQ(vegas_model_quantize(src.c_str(), tmp.file("full").c_str(), "FP8"), VEGAS_ERR_IO);
  EXPECT_EQ(vegas_model_quantize(src.c_str(), tmp.file("abi").c_str(), "Fp8"), VEGAS_OK);
  EXPECT_TRUE(fs::exists(tmp.file("abi/model.safetensors")));
}

}  // namespace
}  // namespace vegas
