#include "model/fp8_weights.h"

#include <cmath>
#include <limits>

#include "common/bf16.h"
#include "common/ends_with.h"
#include "common/error.h"
#include "common/parallel_rows.h"

namespace vegas {

namespace {

// The scale of value (n, k) of an [N][K] weight, from its scale tensor.
struct ScaleLayout {
  std::vector<float> values;  // the scale tensor as floats, row-major
  int64_t cols = 1;           // of the scale tensor
  int64_t rows_per = 1;       // weight rows per scale row (N for one scale row)
  int64_t cols_per = 1;       // weight columns per scale column
  float at(int64_t n, int64_t k) const {
    return values[static_cast<size_t>((n / rows_per) * cols + k / cols_per)];
  }
};

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The block edge along one dimension of `size` split into `blocks` scale
// entries: 128 where that tiles it (the layout of the published FP8
// releases, whose last block may be partial), else an exact division; 0 if
// neither fits.
int64_t block_edge(int64_t size, int64_t blocks) {
  if (blocks <= 0) return 0;
  if (ceil_div(size, 128) == blocks) return 128;
  return size % blocks == 0 ? size / blocks : 0;
}

// NAME_scale_inv: one scale per block of the weight.
bool block_layout(const TensorView &scale, int64_t n, int64_t k, ScaleLayout *out) {
  if (scale.shape.size() != 2) return false;
  const int64_t bn = block_edge(n, scale.shape[0]), bk = block_edge(k, scale.shape[1]);
  if (bn == 0 || bk == 0) return false;
  out->cols = scale.shape[1];
  out->rows_per = bn;
  out->cols_per = bk;
  return true;
}

// NAME_scale: per tensor, per output channel or per group of inputs.
bool channel_layout(const TensorView &scale, int64_t n, int64_t k, ScaleLayout *out) {
  const std::vector<int64_t> &s = scale.shape;
  const int64_t count = scale.numel();
  if (count == 1) {  // [] or [1] or [1, 1]
    out->rows_per = n;
    out->cols_per = k;
    return true;
  }
  const int64_t rows = s.empty() ? 1 : s[0];
  const int64_t cols = s.size() == 2 ? s[1] : 1;
  if (s.size() > 2 || rows != n || cols <= 0 || k % cols != 0) return false;
  out->cols = cols;
  out->rows_per = 1;
  out->cols_per = k / cols;
  return true;
}

// One scale per 128 values of each row ([n][k / 128]), where the layout's
// scales are constant over such groups; empty where not.
std::vector<float> scales_per_group(const ScaleLayout &layout, int64_t n, int64_t k) {
  constexpr int64_t kGroup = 128;
  if (k % kGroup != 0 || layout.cols_per % kGroup != 0) return {};
  std::vector<float> out(static_cast<size_t>(n * (k / kGroup)));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < k / kGroup; ++g)
      out[static_cast<size_t>(r * (k / kGroup) + g)] = layout.at(r, g * kGroup);
  return out;
}

}  // namespace

float fp8_e4m3_to_f32(uint8_t bits) {
  const int exponent = (bits >> 3) & 15, mantissa = bits & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<float>::quiet_NaN();
  const float magnitude = exponent == 0
                              ? std::ldexp(static_cast<float>(mantissa), -9)  // subnormal
                              : std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  return (bits & 0x80) ? -magnitude : magnitude;
}

void dequantize_fp8_weights(std::map<std::string, TensorView> &tensors,
                            std::vector<std::shared_ptr<const void>> &owners,
                            const std::string &source) {
  float table[256];
  for (int b = 0; b < 256; ++b) table[b] = fp8_e4m3_to_f32(static_cast<uint8_t>(b));
  std::vector<std::string> used;
  for (auto &[name, view] : tensors) {
    if (view.dtype != DType::kF8E4M3) continue;
    const std::string where = source + ": FP8 tensor " + name;
    if (view.shape.size() != 2 || !ends_with(name, ".weight"))
      fail(VEGAS_ERR_FORMAT, where + " of shape " + shape_string(view.shape) +
                                 " is not a 2-D weight, the only FP8 tensors read");
    const int64_t n = view.shape[0], k = view.shape[1];
    ScaleLayout layout;
    const TensorView *scale = nullptr;
    if (auto it = tensors.find(name + "_scale_inv"); it != tensors.end()) {
      scale = &it->second;
      if (!block_layout(*scale, n, k, &layout))
        fail(VEGAS_ERR_FORMAT, where + ": its block scales " + name + "_scale_inv of shape " +
                                   shape_string(scale->shape) + " do not tile " +
                                   shape_string(view.shape));
    } else if (auto it2 = tensors.find(name + "_scale"); it2 != tensors.end()) {
      scale = &it2->second;
      if (!channel_layout(*scale, n, k, &layout))
        fail(VEGAS_ERR_FORMAT,
             where + ": its scales " + name + "_scale of shape " + shape_string(scale->shape) +
                 " are neither per tensor, per output row nor per input group of " +
                 shape_string(view.shape));
    } else {
      fail(VEGAS_ERR_FORMAT, where + " has no " + name + "_scale or " + name + "_scale_inv");
    }
    if (scale->dtype == DType::kF8E4M3)
      fail(VEGAS_ERR_FORMAT, where + ": its scale tensor is FP8 too");
    layout.values.resize(static_cast<size_t>(scale->numel()));
    scale->to_f32(layout.values.data());
    used.push_back(scale->name);

    auto out = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(n * k));
    const auto *q = static_cast<const uint8_t *>(view.data);
    uint16_t *dst = out->data();
    parallel_rows(n, [&](int64_t r) {
      for (int64_t c = 0; c < k; ++c)
        dst[r * k + c] = f32_to_bf16(table[q[r * k + c]] * layout.at(r, c));
    });
    view.dtype = DType::kBF16;
    view.data = out->data();
    view.nbytes = out->size() * 2;
    owners.push_back(out);
    auto groups = std::make_shared<std::vector<float>>(scales_per_group(layout, n, k));
    if (!groups->empty()) {
      view.fp8 = q;  // the mapped file's bytes: they live as long as the store
      view.fp8_scales = groups->data();
      owners.push_back(groups);
    }
    // A static activation scale: both backends keep activations in bf16/f32.
    const std::string prefix = name.substr(0, name.size() - std::string("weight").size());
    if (tensors.count(prefix + "input_scale") != 0) used.push_back(prefix + "input_scale");
  }
  for (const std::string &s : used) tensors.erase(s);
}

}  // namespace vegas
