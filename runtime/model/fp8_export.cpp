#include "model/fp8_export.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/bf16.h"
#include "common/error.h"
#include "common/tensor_write.h"
#include "model/fp8_weights.h"
#include "model/weight_store.h"

namespace vegas {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kBlock = 128;
constexpr float kE4M3Max = 448.0f;

// The 127 non-negative finite e4m3 values, ascending (codes 0x00..0x7e).
const std::vector<float> &e4m3_values() {
  static const std::vector<float> v = [] {
    std::vector<float> out;
    for (int c = 0; c < 0x7f; ++c) out.push_back(fp8_e4m3_to_f32(static_cast<uint8_t>(c)));
    return out;
  }();
  return v;
}

// The layer matrices the FP8 releases store as F8: q/k/v/o and gate/up/down.
bool is_fp8_matrix(const std::string &name, const TensorView &t) {
  const std::string suffix = "_proj.weight";
  return t.shape.size() == 2 && name.find("layers.") != std::string::npos &&
         name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// One tensor of the output file: its header entry and a producer of its bytes.
// A matrix's codes come just before its scales, which the codes' pass
// computed (`scales`, shared by the two entries): one conversion of it.
struct OutTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  uint64_t nbytes = 0;
  const TensorView *source = nullptr;
  enum class Kind { kAsStored, kCodes, kScales } kind = Kind::kAsStored;
  std::shared_ptr<std::vector<float>> scales;
};

// The block scales of an [n][k] matrix: max |w| / 448 per 128 x 128 block (1 for an all-zero one).
std::vector<float> block_scales(const std::vector<float> &w, int64_t n, int64_t k) {
  const int64_t bn = (n + kBlock - 1) / kBlock, bk = (k + kBlock - 1) / kBlock;
  std::vector<float> amax(static_cast<size_t>(bn * bk), 0.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      float &m = amax[static_cast<size_t>((r / kBlock) * bk + c / kBlock)];
      m = std::max(m, std::fabs(w[static_cast<size_t>(r * k + c)]));
    }
  for (float &m : amax) m = m > 0.0f ? m / kE4M3Max : 1.0f;
  return amax;
}

std::vector<uint8_t> produce(const OutTensor &t) {
  const TensorView &v = *t.source;
  if (t.kind == OutTensor::Kind::kAsStored) {
    const auto *p = static_cast<const uint8_t *>(v.data);
    return std::vector<uint8_t>(p, p + v.nbytes);
  }
  if (t.kind == OutTensor::Kind::kScales) {
    if (t.scales->empty()) fail(VEGAS_ERR_INTERNAL, t.name + " written before its codes");
    std::vector<uint8_t> out(t.scales->size() * 4);
    std::memcpy(out.data(), t.scales->data(), out.size());
    t.scales->clear();
    return out;
  }
  const int64_t n = v.shape[0], k = v.shape[1];
  std::vector<float> w(static_cast<size_t>(n * k));
  v.to_f32(w.data());
  std::vector<float> &scales = *t.scales;
  scales = block_scales(w, n, k);
  const int64_t bk = (k + kBlock - 1) / kBlock;
  std::vector<uint8_t> codes(w.size());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const size_t i = static_cast<size_t>(r * k + c);
      codes[i] =
          f32_to_fp8_e4m3(w[i] / scales[static_cast<size_t>((r / kBlock) * bk + c / kBlock)]);
    }
  return codes;
}

void write_safetensors(const std::string &path, const std::vector<OutTensor> &tensors) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const OutTensor &t : tensors) {
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // the data starts 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(VEGAS_ERR_IO, path + ": cannot be created");
  const uint64_t length = text.size();
  uint8_t prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<uint8_t>(length >> (8 * i));
  out.write(reinterpret_cast<const char *>(prefix), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const OutTensor &t : tensors) write_tensor_bytes(out, path, t.name, produce(t), t.nbytes);
  out.close();
  if (!out) fail(VEGAS_ERR_IO, path + ": could not be written (disk full?)");
}

std::vector<OutTensor> plan_tensors(const WeightStore &store) {
  std::vector<OutTensor> out;
  for (const auto &[name, view] : store.tensors()) {
    OutTensor t;
    t.name = name;
    t.source = &view;
    t.shape = view.shape;
    if (!is_fp8_matrix(name, view)) {
      t.dtype = dtype_name(view.dtype);
      t.nbytes = view.nbytes;
      out.push_back(t);
      continue;
    }
    t.dtype = "F8_E4M3";
    t.kind = OutTensor::Kind::kCodes;
    t.scales = std::make_shared<std::vector<float>>();
    t.nbytes = static_cast<uint64_t>(view.numel());
    out.push_back(t);
    OutTensor s = t;
    s.name = name + "_scale_inv";
    s.dtype = "F32";
    s.kind = OutTensor::Kind::kScales;
    s.shape = {(view.shape[0] + kBlock - 1) / kBlock, (view.shape[1] + kBlock - 1) / kBlock};
    s.nbytes = static_cast<uint64_t>(s.shape[0] * s.shape[1] * 4);
    out.push_back(s);
  }
  return out;
}

void write_config(const std::string &model_dir, const std::string &path) {
  std::ifstream in(model_dir + "/config.json");
  if (!in) fail(VEGAS_ERR_IO, model_dir + "/config.json: cannot be read");
  nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
  if (config.is_discarded() || !config.is_object())
    fail(VEGAS_ERR_FORMAT, model_dir + "/config.json: not a JSON object");
  config["quantization_config"] = {{"quant_method", "fp8"},
                                   {"fmt", "e4m3"},
                                   {"weight_block_size", {kBlock, kBlock}},
                                   {"activation_scheme", "dynamic"}};
  std::ofstream out(path, std::ios::trunc);
  out << config.dump(2) << "\n";
  if (!out) fail(VEGAS_ERR_IO, path + ": could not be written");
}

void write_all(const std::string &model_dir, const std::string &out_dir) {
  const std::unique_ptr<WeightStore> store = WeightStore::open(model_dir);
  write_config(model_dir, out_dir + "/config.json");
  for (const char *name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                           "generation_config.json", "vocab.json", "merges.txt"}) {
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(model_dir) / name, ec)) continue;
    fs::copy_file(fs::path(model_dir) / name, fs::path(out_dir) / name, ec);
    if (ec) fail(VEGAS_ERR_IO, out_dir + "/" + name + ": could not be written: " + ec.message());
  }
  write_safetensors(out_dir + "/model.safetensors", plan_tensors(*store));
}

}  // namespace

uint8_t f32_to_fp8_e4m3(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::min(std::fabs(x), kE4M3Max);
  const std::vector<float> &v = e4m3_values();
  // The first value >= a, and the one below it: the nearer, ties to the even code.
  const size_t hi = static_cast<size_t>(std::lower_bound(v.begin(), v.end(), a) - v.begin());
  if (hi == 0) return sign;
  const size_t lo = hi - 1;
  const float below = a - v[lo], above = v[hi] - a;
  const size_t code = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<uint8_t>(sign | code);
}

void export_fp8(const std::string &model_dir, const std::string &out_dir) {
  std::error_code ec;
  if (fs::exists(out_dir, ec) && !(fs::is_directory(out_dir, ec) && fs::is_empty(out_dir, ec)))
    fail(VEGAS_ERR_IO, "quantize: " + out_dir + " exists and is not an empty directory");
  const bool created = fs::create_directories(out_dir, ec);
  if (ec) fail(VEGAS_ERR_IO, "quantize: " + out_dir + " cannot be created: " + ec.message());
  try {
    write_all(model_dir, out_dir);
  } catch (...) {  // no half model: what this call wrote goes
    for (const auto &entry : fs::directory_iterator(out_dir, ec)) fs::remove(entry.path(), ec);
    if (created) fs::remove(out_dir, ec);
    throw;
  }
}

}  // namespace vegas
