// Each formula mirrors the float32 tensor arithmetic of transformers'
// modeling_rope_utils.py: scalars from config.json are rounded to float before
// they meet a tensor, `a / tensor` is `reciprocal(tensor) * a`, and the plain
// Python scalar arithmetic (yarn's correction range, attention factor) stays in
// double. Float variables keep each intermediate rounded as torch rounds it.
#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace vegas {

namespace {

constexpr double kPi = 3.14159265358979323846;

// 1 / base^(2i/dim) for i in [0, dim/2): the unscaled RoPE frequencies.
std::vector<float> default_inv_freq(double theta, int32_t dim) {
  std::vector<float> inv(static_cast<size_t>(dim / 2));
  const float base = static_cast<float>(theta);
  for (int32_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(base, exponent);
  }
  return inv;
}

// Llama 3.1: frequencies whose wavelength exceeds the pre-training context /
// low_freq_factor are divided by `factor`, those shorter than context /
// high_freq_factor are kept, and the band between is blended linearly in
// context / wavelength.
std::vector<float> llama3_inv_freq(const RopeConfig &r, int32_t dim) {
  std::vector<float> inv = default_inv_freq(r.theta, dim);
  const double old_ctx = static_cast<double>(r.original_max_position);
  const float low_freq_wavelen = static_cast<float>(old_ctx / r.low_freq_factor);
  const float high_freq_wavelen = static_cast<float>(old_ctx / r.high_freq_factor);
  const float factor = static_cast<float>(r.factor);
  const float two_pi = static_cast<float>(2.0 * kPi);
  const float ctx = static_cast<float>(old_ctx);
  const float low = static_cast<float>(r.low_freq_factor);
  const float span = static_cast<float>(r.high_freq_factor - r.low_freq_factor);
  for (float &f : inv) {
    const float wavelen = (1.0f / f) * two_pi;
    const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
    const float smooth = ((1.0f / wavelen) * ctx - low) / span;
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    f = medium ? smoothed : scaled;
  }
  return inv;
}

// The dimension index at which a frequency completes `rotations` turns over
// `context` positions (YaRN's inverse dimension formula).
double yarn_correction_dim(double rotations, int32_t dim, double base, double context) {
  return (dim * std::log(context / (rotations * 2.0 * kPi))) / (2.0 * std::log(base));
}

// YaRN: dimensions rotating fast (index below the beta_fast bound) keep their
// frequency, slow ones (beyond the beta_slow bound) are interpolated by
// `factor`, with a linear ramp between.
std::vector<float> yarn_inv_freq(const RopeConfig &r, int32_t dim) {
  const double context = static_cast<double>(r.original_max_position);
  double low = yarn_correction_dim(r.beta_fast, dim, r.theta, context);
  double high = yarn_correction_dim(r.beta_slow, dim, r.theta, context);
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // avoids a division by zero in the ramp

  const float base = static_cast<float>(r.theta);
  const float factor = static_cast<float>(r.factor);
  const float low_f = static_cast<float>(low);
  const float range = static_cast<float>(high - low);
  std::vector<float> inv(static_cast<size_t>(dim / 2));
  for (int32_t i = 0; i < dim / 2; ++i) {
    const float pos_freq = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim));
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (factor * pos_freq);
    const float ramp = std::min(std::max((static_cast<float>(i) - low_f) / range, 0.0f), 1.0f);
    const float keep = 1.0f - ramp;  // share of the unscaled frequency
    inv[static_cast<size_t>(i)] = interpolation * (1.0f - keep) + extrapolation * keep;
  }
  return inv;
}

double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

}  // namespace

std::vector<float> rope_inv_freq(const ModelConfig &config) {
  const int32_t dim = config.rotary_dim();
  if (dim < 2 || dim % 2 != 0 || !(config.rope.theta > 1.0))
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "rope: rotary dimension " + std::to_string(dim) + " must be even and >= 2, theta > 1");
  const RopeConfig &r = config.rope;
  if (!r.freq_factors.empty()) {
    if (r.freq_factors.size() != static_cast<size_t>(dim / 2))
      fail(VEGAS_ERR_FORMAT, "rope: " + std::to_string(r.freq_factors.size()) +
                                 " frequency factors for " + std::to_string(dim / 2) +
                                 " rotated pairs");
    std::vector<float> inv = default_inv_freq(r.theta, dim);
    for (size_t i = 0; i < inv.size(); ++i) inv[i] /= r.freq_factors[i];
    return inv;
  }
  switch (r.type) {
    case RopeType::kDefault:
      return default_inv_freq(r.theta, dim);
    case RopeType::kLinear: {
      std::vector<float> inv = default_inv_freq(r.theta, dim);
      for (float &f : inv) f /= static_cast<float>(r.factor);
      return inv;
    }
    case RopeType::kLlama3:
      return llama3_inv_freq(r, dim);
    case RopeType::kYarn:
      return yarn_inv_freq(r, dim);
  }
  fail(VEGAS_ERR_INTERNAL, "rope: unknown rope type");
}

float rope_attention_scaling(const ModelConfig &config) {
  const RopeConfig &r = config.rope;
  if (r.type != RopeType::kYarn) return 1.0f;
  if (r.attention_factor) return static_cast<float>(*r.attention_factor);
  if (r.mscale != 0.0 && r.mscale_all_dim != 0.0)
    return static_cast<float>(yarn_mscale(r.factor, r.mscale) /
                              yarn_mscale(r.factor, r.mscale_all_dim));
  return static_cast<float>(yarn_mscale(r.factor, 1.0));
}

}  // namespace vegas
