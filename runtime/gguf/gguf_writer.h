// Writes a GGUF file (the layout gguf_file.h reads): metadata entries and
// the tensor directory are collected, then the file is written in one pass,
// each tensor's bytes made by its producer when their turn comes (one tensor
// in memory at a time) and aligned to general.alignment (32). A file that
// cannot be written is an IO error naming it; a half-written file is removed.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
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

  // dims in GGML order (dims[0] varies fastest); `produce` returns the
  // tensor's `nbytes` bytes as `type` stores them, called once, by write().
  using Producer = std::function<std::vector<uint8_t>()>;
  void add_tensor(const std::string &name, const std::vector<int64_t> &dims, uint32_t type,
                  uint64_t nbytes, Producer produce);

  void write(const std::string &path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    uint32_t type;
    uint64_t nbytes;
    Producer produce;
  };
  void write_data(std::ofstream &out, const std::string &path) const;
  void entry(const std::string &key, uint32_t type, const std::vector<uint8_t> &value);
  template <typename T>
  void set_scalar(const std::string &key, uint32_t type, T value);
  std::vector<uint8_t> metadata_;  // serialised (key, type, value) entries
  uint64_t n_entries_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace vegas::gguf
