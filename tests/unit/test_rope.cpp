// RoPE inverse frequencies and cos/sin scaling for each rope type, checked
// against closed forms evaluated here in double precision. rope.cpp follows
// transformers' float32 arithmetic, so agreement is to float precision: the
// exponent 2i/dim is rounded to float before the power, which moves
// theta^(-2i/dim) by up to ln(theta) * 2^-24 relative (~1e-6 for theta 1e6).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/rope.h"
#include "tiny_checkpoint.h"

namespace vegas {
namespace {

using nlohmann::json;
constexpr double kRelTol = 3e-6;
constexpr double kPi = 3.14159265358979323846;

ModelConfig config_with(const json &rope, int head_dim, double theta) {
  json j = test::tiny_config_json("Qwen3ForCausalLM");
  j["head_dim"] = head_dim;
  j["rope_theta"] = theta;
  j["max_position_embeddings"] = 131072;
  if (!rope.is_null()) j["rope_scaling"] = rope;
  return parse_model_config(j.dump(), "test/config.json");
}

double plain_freq(double theta, int i, int dim) {
  return std::pow(theta, -2.0 * i / dim);
}

void expect_rel_near(double actual, double expected, int i) {
  EXPECT_NEAR(actual, expected, kRelTol * std::fabs(expected)) << "pair " << i;
}

// Proves default RoPE: theta^(-2i/d) for i < d/2, first frequency exactly 1, no scaling.
TEST(Rope, Default) {
  const ModelConfig c = config_with(nullptr, 64, 1e6);
  const std::vector<float> inv = rope_inv_freq(c);
  ASSERT_EQ(inv.size(), 32u);
  EXPECT_EQ(inv[0], 1.0f);
  for (int i = 0; i < 32; ++i) expect_rel_near(inv[i], plain_freq(1e6, i, 64), i);
  EXPECT_EQ(rope_attention_scaling(c), 1.0f);
}

// Proves partial rotary: only int(head_dim * factor) dimensions rotate, with
// frequencies over that smaller dimension.
TEST(Rope, PartialRotary) {
  json j = test::tiny_config_json("LlamaForCausalLM");
  j["hidden_size"] = 64;  // head_dim 16
  j["partial_rotary_factor"] = 0.5;
  const ModelConfig c = parse_model_config(j.dump(), "test/config.json");
  const std::vector<float> inv = rope_inv_freq(c);
  ASSERT_EQ(inv.size(), 4u);
  for (int i = 0; i < 4; ++i) expect_rel_near(inv[i], plain_freq(10000.0, i, 8), i);
}

// Proves linear scaling divides every frequency by the factor.
TEST(Rope, Linear) {
  const ModelConfig c = config_with({{"type", "linear"}, {"factor", 4.0}}, 64, 10000.0);
  const std::vector<float> inv = rope_inv_freq(c);
  ASSERT_EQ(inv.size(), 32u);
  for (int i = 0; i < 32; ++i) expect_rel_near(inv[i], plain_freq(1e4, i, 64) / 4.0, i);
  EXPECT_EQ(rope_attention_scaling(c), 1.0f);
}

// Proves Llama 3.1 scaling with its published parameters: wavelengths shorter
// than 8192/4 keep their frequency, longer than 8192/1 are divided by 8, and
// the band between blends with s = (8192/wavelength - 1) / (4 - 1); all three
// bands occur for head_dim 128, theta 5e5.
TEST(Rope, Llama3) {
  const ModelConfig c = config_with({{"rope_type", "llama3"},
                                     {"factor", 8.0},
                                     {"low_freq_factor", 1.0},
                                     {"high_freq_factor", 4.0},
                                     {"original_max_position_embeddings", 8192}},
                                    128, 500000.0);
  const std::vector<float> inv = rope_inv_freq(c);
  ASSERT_EQ(inv.size(), 64u);
  int kept = 0, divided = 0, blended = 0;
  for (int i = 0; i < 64; ++i) {
    const double f = plain_freq(5e5, i, 128);
    const double wavelength = 2 * kPi / f;
    double expected;
    if (wavelength < 8192.0 / 4.0) {
      expected = f;
      ++kept;
    } else if (wavelength > 8192.0 / 1.0) {
      expected = f / 8.0;
      ++divided;
    } else {
      const double s = (8192.0 / wavelength - 1.0) / (4.0 - 1.0);
      expected = (1 - s) * f / 8.0 + s * f;
      ++blended;
    }
    expect_rel_near(inv[i], expected, i);
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
  EXPECT_EQ(rope_attention_scaling(c), 1.0f);
}

// YaRN's bound: the pair index d whose wavelength 2*pi*theta^(2d/D) fits
// `context / rotations` times into the pre-training context, solved for d.
double pair_with_rotations(double rotations, int dim, double theta, double context) {
  return dim * std::log(context / (2 * kPi * rotations)) / (2 * std::log(theta));
}

// Expected YaRN frequencies: unscaled below `low`, divided by `factor` from
// `high`, linear in the pair index between.
void expect_yarn(const std::vector<float> &inv, double low, double high, double factor,
                 double theta, int dim) {
  for (int i = 0; i < dim / 2; ++i) {
    const double ramp = std::min(std::max((i - low) / (high - low), 0.0), 1.0);
    const double f = plain_freq(theta, i, dim);
    expect_rel_near(inv[i], (1 - ramp) * f + ramp * f / factor, i);
  }
}

// Proves YaRN (Qwen3's long-context setting: factor 4 over 32768, betas 32/1):
// the correction range uses the original context, is widened to whole pair
// indices, the scale is 0.1 ln(factor) + 1, and the unscaled pairs are
// bit-identical to default RoPE.
TEST(Rope, Yarn) {
  const json rope = {
      {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  const ModelConfig c = config_with(rope, 128, 1e6);
  const std::vector<float> inv = rope_inv_freq(c);
  ASSERT_EQ(inv.size(), 64u);
  const double low = std::floor(pair_with_rotations(32, 128, 1e6, 32768));
  const double high = std::ceil(pair_with_rotations(1, 128, 1e6, 32768));
  ASSERT_GT(low, 0);
  ASSERT_LT(high, 63);
  expect_yarn(inv, low, high, 4.0, 1e6, 128);
  const std::vector<float> plain = rope_inv_freq(config_with(nullptr, 128, 1e6));
  for (int i = 0; i <= static_cast<int>(low); ++i) EXPECT_EQ(inv[i], plain[i]) << i;
  EXPECT_FLOAT_EQ(rope_attention_scaling(c), static_cast<float>(0.1 * std::log(4.0) + 1.0));

  // truncate: false keeps the fractional bounds.
  json untruncated = rope;
  untruncated["truncate"] = false;
  expect_yarn(rope_inv_freq(config_with(untruncated, 128, 1e6)),
              pair_with_rotations(32, 128, 1e6, 32768), pair_with_rotations(1, 128, 1e6, 32768),
              4.0, 1e6, 128);

  // Other betas move the bounds.
  json betas = rope;
  betas["beta_fast"] = 8;
  betas["beta_slow"] = 2;
  expect_yarn(rope_inv_freq(config_with(betas, 128, 1e6)),
              std::floor(pair_with_rotations(8, 128, 1e6, 32768)),
              std::ceil(pair_with_rotations(2, 128, 1e6, 32768)), 4.0, 1e6, 128);
}

// Proves the YaRN cos/sin scale: an explicit attention_factor wins; else the
// mscale / mscale_all_dim ratio when both are set; else 0.1 ln(factor) + 1,
// which is 1 for factor <= 1.
TEST(Rope, YarnAttentionScaling) {
  json rope = {{"rope_type", "yarn"}, {"factor", 40.0}, {"original_max_position_embeddings", 4096}};
  rope["attention_factor"] = 0.75;
  EXPECT_FLOAT_EQ(rope_attention_scaling(config_with(rope, 64, 1e4)), 0.75f);
  rope.erase("attention_factor");
  rope["mscale"] = 0.707;
  rope["mscale_all_dim"] = 1.0;
  const double ratio = (0.1 * 0.707 * std::log(40.0) + 1) / (0.1 * 1.0 * std::log(40.0) + 1);
  EXPECT_FLOAT_EQ(rope_attention_scaling(config_with(rope, 64, 1e4)), static_cast<float>(ratio));
  rope["mscale_all_dim"] = 0.0;  // only one of the pair: the plain formula
  EXPECT_FLOAT_EQ(rope_attention_scaling(config_with(rope, 64, 1e4)),
                  static_cast<float>(0.1 * std::log(40.0) + 1));
  rope["factor"] = 1.0;
  EXPECT_EQ(rope_attention_scaling(config_with(rope, 64, 1e4)), 1.0f);
}

// Proves a config that cannot have been parsed (odd rotary dim) is rejected.
TEST(Rope, RejectsBadDimension) {
  ModelConfig c = config_with(nullptr, 64, 1e4);
  c.head_dim = 7;
  EXPECT_THROW(rope_inv_freq(c), Error);
}

}  // namespace
}  // namespace vegas
