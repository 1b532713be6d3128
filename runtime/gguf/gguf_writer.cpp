#include "gguf/gguf_writer.h"

#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "common/tensor_write.h"
#include "gguf/gguf_file.h"

namespace vegas::gguf {

namespace {

constexpr uint64_t kAlignment = 32;  // general.alignment's default

uint64_t aligned(uint64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

template <typename T>
void put(std::vector<uint8_t> &out, T value) {  // little-endian hosts only, as the reader
  const auto *p = reinterpret_cast<const uint8_t *>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

void put_string(std::vector<uint8_t> &out, const std::string &s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

}  // namespace

void Writer::entry(const std::string &key, uint32_t type, const std::vector<uint8_t> &value) {
  put_string(metadata_, key);
  put<uint32_t>(metadata_, type);
  metadata_.insert(metadata_.end(), value.begin(), value.end());
  ++n_entries_;
}

void Writer::set_string(const std::string &key, const std::string &value) {
  std::vector<uint8_t> v;
  put_string(v, value);
  entry(key, kString, v);
}

template <typename T>
void Writer::set_scalar(const std::string &key, uint32_t type, T value) {
  std::vector<uint8_t> v;
  put(v, value);
  entry(key, type, v);
}

void Writer::set_u32(const std::string &key, uint32_t value) {
  set_scalar(key, kUint32, value);
}

void Writer::set_i32(const std::string &key, int32_t value) {
  set_scalar(key, kInt32, value);
}

void Writer::set_f32(const std::string &key, float value) {
  set_scalar(key, kFloat32, value);
}

void Writer::set_bool(const std::string &key, bool value) {
  entry(key, kBool, {static_cast<uint8_t>(value ? 1 : 0)});
}

void Writer::set_strings(const std::string &key, const std::vector<std::string> &values) {
  std::vector<uint8_t> v;
  put<uint32_t>(v, kString);
  put<uint64_t>(v, values.size());
  for (const std::string &s : values) put_string(v, s);
  entry(key, kArray, v);
}

void Writer::set_i32s(const std::string &key, const std::vector<int32_t> &values) {
  std::vector<uint8_t> v;
  put<uint32_t>(v, kInt32);
  put<uint64_t>(v, values.size());
  for (int32_t x : values) put(v, x);
  entry(key, kArray, v);
}

void Writer::add_tensor(const std::string &name, const std::vector<int64_t> &dims, uint32_t type,
                        uint64_t nbytes, Producer produce) {
  tensors_.push_back(Tensor{name, dims, type, nbytes, std::move(produce)});
}

void Writer::write_data(std::ofstream &out, const std::string &path) const {
  static const char zeros[kAlignment] = {};
  for (const Tensor &t : tensors_) {
    write_tensor_bytes(out, path, t.name, t.produce(), t.nbytes);
    out.write(zeros, static_cast<std::streamsize>(aligned(t.nbytes) - t.nbytes));
    if (!out) fail(VEGAS_ERR_IO, path + ": could not be written (disk full?)");
  }
}

void Writer::write(const std::string &path) const {
  std::vector<uint8_t> head;
  head.insert(head.end(), {'G', 'G', 'U', 'F'});
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, n_entries_);
  head.insert(head.end(), metadata_.begin(), metadata_.end());
  uint64_t offset = 0;  // within the data section
  for (const Tensor &t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) put<uint64_t>(head, static_cast<uint64_t>(d));
    put<uint32_t>(head, t.type);
    put<uint64_t>(head, offset);
    offset += aligned(t.nbytes);
  }
  head.resize(aligned(head.size()), 0);

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(VEGAS_ERR_IO, path + ": cannot be created");
  out.write(reinterpret_cast<const char *>(head.data()), static_cast<std::streamsize>(head.size()));
  try {
    write_data(out, path);
    out.close();
    if (!out) fail(VEGAS_ERR_IO, path + ": could not be written (disk full?)");
  } catch (...) {  // a tensor that could not be made or written: no half file
    out.close();
    // Only a file this call made: never a device or pipe the caller named.
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) std::filesystem::remove(path, ec);
    throw;
  }
}

}  // namespace vegas::gguf
