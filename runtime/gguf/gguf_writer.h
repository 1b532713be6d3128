// Writes a GGUF file (the layout gguf_file.h reads): metadata entries and
// tensors are collected, then written in one pass, the tensor data aligned to
// general.alignment (32). A file that cannot be written is an IO error naming
// it; a half-written file is removed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vegas::gguf {

class Writer {
 public:
  void set_string(const std::string &key, const std::string &value);
  void set_u32(const std::string &key, uint32_t value);
  void set_i32(const std::string &key, int32_t value);
  void set_f32(const std::string &key, float value);
  void set_bool(const std::string &key, bool value);
  void set_strings(const std::string &key, const std::vector<std::string> &values);
  void set_i32s(const std::string &key, const std::vector<int32_t> &values);

  // dims in GGML order (dims[0] varies fastest); `data` holds the tensor as
  // `type` stores it.
  void add_tensor(const std::string &name, const std::vector<int64_t> &dims, uint32_t type,
                  std::vector<uint8_t> data);

  void write(const std::string &path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    uint32_t type;
    std::vector<uint8_t> data;
  };
  void entry(const std::string &key, uint32_t type, const std::vector<uint8_t> &value);
  std::vector<uint8_t> metadata_;  // serialised (key, type, value) entries
  uint64_t n_entries_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace vegas::gguf
