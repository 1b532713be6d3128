// Test helpers: temporary directories and hand-made safetensors files,
// including deliberately broken ones (raw header text, raw length prefix).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/bf16.h"

namespace vegas::test {

// A fresh directory under $TMPDIR, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "vegas-test-XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) std::abort();
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }
  // Writes `text` to the file `name` in the directory; returns its path.
  std::string write(const std::string &name, const std::string &text) const {
    const std::string p = file(name);
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return p;
  }

 private:
  std::string path_;
};

inline void write_bytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct FakeTensor {
  std::string name;
  std::string dtype;  // safetensors name: "F32", "F16", "BF16", ...
  std::vector<int64_t> shape;
  std::string bytes;  // raw little-endian data
};

inline FakeTensor f32_tensor(const std::string &name, std::vector<int64_t> shape,
                             const std::vector<float> &values) {
  std::string bytes(values.size() * 4, '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return {name, "F32", std::move(shape), std::move(bytes)};
}

inline FakeTensor bf16_tensor(const std::string &name, std::vector<int64_t> shape,
                              const std::vector<float> &values) {
  std::string bytes(values.size() * 2, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = f32_to_bf16(values[i]);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
  return {name, "BF16", std::move(shape), std::move(bytes)};
}

inline FakeTensor f16_tensor(const std::string &name, std::vector<int64_t> shape,
                             const std::vector<uint16_t> &bits) {
  std::string bytes(bits.size() * 2, '\0');
  std::memcpy(bytes.data(), bits.data(), bytes.size());
  return {name, "F16", std::move(shape), std::move(bytes)};
}

// The 8-byte little-endian length, then the header text, then the data.
inline std::string frame(uint64_t header_len, const std::string &header, const std::string &data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>(header_len >> (8 * i));
  return out + header + data;
}

// The header of `tensors` laid out back to back, in order.
inline nlohmann::json header_of(const std::vector<FakeTensor> &tensors) {
  nlohmann::json h = nlohmann::json::object();
  h["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const FakeTensor &t : tensors) {
    h[t.name] = {{"dtype", t.dtype},
                 {"shape", t.shape},
                 {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  return h;
}

inline std::string data_of(const std::vector<FakeTensor> &tensors) {
  std::string data;
  for (const FakeTensor &t : tensors) data += t.bytes;
  return data;
}

// A well-formed file; `header` may be edited by the caller to break it.
inline void write_safetensors(const std::string &path, const nlohmann::json &header,
                              const std::string &data) {
  const std::string text = header.dump();
  write_bytes(path, frame(text.size(), text, data));
}

inline void write_safetensors(const std::string &path, const std::vector<FakeTensor> &tensors) {
  write_safetensors(path, header_of(tensors), data_of(tensors));
}

}  // namespace vegas::test
