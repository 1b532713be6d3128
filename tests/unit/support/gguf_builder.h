// Builds GGUF files in memory for tests: metadata of every value type (and,
// through set_raw, any bytes at all, for malformed files), tensors with their
// data, version and alignment.
//
// Layout written (little-endian): "GGUF", uint32 version, uint64 tensor count,
// uint64 metadata count; each metadata entry as (string key, uint32 type,
// value); each tensor as (string name, uint32 rank, uint64 dims[rank], uint32
// ggml type, uint64 offset into the data section); zero padding to the next
// multiple of the alignment; the data section, each tensor at its offset
// (itself a multiple of the alignment). A string is uint64 length + bytes; an
// array is uint32 element type, uint64 count, the elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"

namespace vegas::test {

class GgufBuilder {
 public:
  using Type = gguf::ValueType;

  GgufBuilder &version(uint32_t v) {
    version_ = v;
    return *this;
  }
  // The alignment the data section is laid out with (write general.alignment
  // too when it is not 32).
  GgufBuilder &alignment(uint64_t a) {
    alignment_ = a;
    return *this;
  }

  // Scalars. Setting a key again replaces its value in place.
  GgufBuilder &set_u8(const std::string &k, uint8_t v) { return scalar(k, Type::kUint8, v); }
  GgufBuilder &set_i8(const std::string &k, int8_t v) { return scalar(k, Type::kInt8, v); }
  GgufBuilder &set_u16(const std::string &k, uint16_t v) { return scalar(k, Type::kUint16, v); }
  GgufBuilder &set_i16(const std::string &k, int16_t v) { return scalar(k, Type::kInt16, v); }
  GgufBuilder &set_u32(const std::string &k, uint32_t v) { return scalar(k, Type::kUint32, v); }
  GgufBuilder &set_i32(const std::string &k, int32_t v) { return scalar(k, Type::kInt32, v); }
  GgufBuilder &set_u64(const std::string &k, uint64_t v) { return scalar(k, Type::kUint64, v); }
  GgufBuilder &set_i64(const std::string &k, int64_t v) { return scalar(k, Type::kInt64, v); }
  GgufBuilder &set_f32(const std::string &k, float v) { return scalar(k, Type::kFloat32, v); }
  GgufBuilder &set_f64(const std::string &k, double v) { return scalar(k, Type::kFloat64, v); }
  GgufBuilder &set_bool(const std::string &k, bool v) {
    return scalar(k, Type::kBool, static_cast<uint8_t>(v ? 1 : 0));
  }
  GgufBuilder &set_string(const std::string &k, const std::string &v) {
    std::vector<uint8_t> payload;
    put_string(payload, v);
    return set_raw(k, Type::kString, std::move(payload));
  }

  // Arrays.
  GgufBuilder &set_string_array(const std::string &k, const std::vector<std::string> &v) {
    std::vector<uint8_t> payload;
    put(payload, static_cast<uint32_t>(Type::kString));
    put(payload, static_cast<uint64_t>(v.size()));
    for (const std::string &s : v) put_string(payload, s);
    return set_raw(k, Type::kArray, std::move(payload));
  }
  // Numbers of `elem_type`, each written as a T (pick T to match the type).
  template <typename T>
  GgufBuilder &set_array(const std::string &k, Type elem_type, const std::vector<T> &v) {
    std::vector<uint8_t> payload;
    put(payload, static_cast<uint32_t>(elem_type));
    put(payload, static_cast<uint64_t>(v.size()));
    for (const T &x : v) put(payload, x);
    return set_raw(k, Type::kArray, std::move(payload));
  }
  GgufBuilder &set_i32_array(const std::string &k, const std::vector<int32_t> &v) {
    return set_array(k, Type::kInt32, v);
  }

  // Any value type with any payload bytes (which need not be well formed).
  GgufBuilder &set_raw(const std::string &k, uint32_t type, std::vector<uint8_t> payload) {
    for (Entry &e : entries_)
      if (e.key == k) {
        e.type = type;
        e.payload = std::move(payload);
        return *this;
      }
    entries_.push_back({k, type, std::move(payload)});
    return *this;
  }
  GgufBuilder &remove(const std::string &k) {
    for (size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].key == k) {
        entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    return *this;
  }

  // A tensor: dims in GGML order (dims[0] varies fastest), its ggml type and
  // its bytes (their count is not checked against the type here).
  GgufBuilder &add_tensor(const std::string &name, std::vector<uint64_t> dims, uint32_t ggml_type,
                          std::vector<uint8_t> data) {
    tensors_.push_back({name, std::move(dims), ggml_type, std::move(data)});
    return *this;
  }

  std::vector<uint8_t> build() const {
    std::vector<uint8_t> out;
    out.insert(out.end(), {'G', 'G', 'U', 'F'});
    put(out, version_);
    put(out, static_cast<uint64_t>(tensors_.size()));
    put(out, static_cast<uint64_t>(entries_.size()));
    for (const Entry &e : entries_) {
      put_string(out, e.key);
      put(out, e.type);
      out.insert(out.end(), e.payload.begin(), e.payload.end());
    }
    uint64_t offset = 0;
    std::vector<uint64_t> offsets;
    for (const Tensor &t : tensors_) {
      put_string(out, t.name);
      put(out, static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) put(out, d);
      put(out, t.type);
      put(out, offset);
      offsets.push_back(offset);
      offset = align(offset + t.data.size());
    }
    if (!tensors_.empty()) {
      const size_t data_start = static_cast<size_t>(align(out.size()));
      out.resize(data_start, 0);
      for (size_t i = 0; i < tensors_.size(); ++i) {
        out.resize(data_start + static_cast<size_t>(offsets[i]), 0);
        out.insert(out.end(), tensors_[i].data.begin(), tensors_[i].data.end());
      }
    }
    return out;
  }

  // Little-endian encoders, for hand-made payloads.
  template <typename T>
  static void put(std::vector<uint8_t> &out, T v) {
    uint8_t bytes[sizeof(T)];
    std::memcpy(bytes, &v, sizeof(T));
    out.insert(out.end(), bytes, bytes + sizeof(T));
  }
  static void put_string(std::vector<uint8_t> &out, const std::string &s) {
    put(out, static_cast<uint64_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }

 private:
  struct Entry {
    std::string key;
    uint32_t type;
    std::vector<uint8_t> payload;
  };
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::vector<uint8_t> data;
  };

  template <typename T>
  GgufBuilder &scalar(const std::string &k, Type type, T v) {
    std::vector<uint8_t> payload;
    put(payload, v);
    return set_raw(k, type, std::move(payload));
  }
  uint64_t align(uint64_t n) const { return (n + alignment_ - 1) / alignment_ * alignment_; }

  uint32_t version_ = 3;
  uint64_t alignment_ = 32;
  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
};

}  // namespace vegas::test
