// A GGUF file (llama.cpp's model format), memory-mapped: its metadata and its
// tensor directory. Every length, count and offset is checked against the
// file before it addresses memory; a bad file is a FORMAT error naming the
// file and the field, an unknown value or tensor type is FORMAT too.
//
// Layout (little-endian): "GGUF", version (2 or 3), tensor count, metadata
// count; the metadata as (key, type, value); the tensor directory as (name,
// rank, dims, type, offset); then, at the next multiple of
// general.alignment (32 unless given), the data section that the offsets
// address.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vegas {

class MappedFile;

namespace gguf {

// The metadata value types of the format.
enum ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // GGML order: dims[0] varies fastest
  uint32_t type = 0;          // GgmlType
  const uint8_t *data = nullptr;
  uint64_t nbytes = 0;

  int64_t numel() const;
};

class File {
 public:
  // Maps and parses `path`. IO when it cannot be read.
  static std::unique_ptr<File> open(const std::string &path);
  // Parses bytes that outlive the File (tests, fuzzing); `source` names them.
  static std::unique_ptr<File> parse(const uint8_t *data, size_t size, const std::string &source);
  ~File();

  uint32_t version() const { return version_; }
  // Key -> value: integers and floats as JSON numbers (unsigned, signed or
  // float as the file typed them; a float32 as the shortest decimal that
  // rounds to it), bools, strings, arrays as JSON arrays.
  const nlohmann::json &metadata() const { return metadata_; }
  const std::vector<TensorInfo> &tensors() const { return tensors_; }
  // nullptr if absent.
  const TensorInfo *find(const std::string &name) const;
  const std::string &source() const { return source_; }

  // Typed metadata reads; a missing key or a value of another type is a
  // FORMAT error naming the file and the key.
  bool has(const std::string &key) const { return metadata_.contains(key); }
  std::string get_string(const std::string &key) const;
  int64_t get_int(const std::string &key) const;
  double get_float(const std::string &key) const;  // integers are accepted too
  bool get_bool(const std::string &key) const;
  const nlohmann::json &get_array(const std::string &key) const;

 private:
  File() = default;
  void parse_all(const uint8_t *data, size_t size);
  std::unique_ptr<MappedFile> file_;
  std::string source_;
  uint32_t version_ = 0;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
};

}  // namespace gguf
}  // namespace vegas
