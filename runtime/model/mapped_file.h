// A whole file mapped read-only into memory (POSIX mmap), unmapped on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace vegas {

class MappedFile {
 public:
  // Throws IO naming the file when it cannot be opened, stat'ed or mapped.
  static std::unique_ptr<MappedFile> open(const std::string &path);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  const uint8_t *data() const { return data_; }  // nullptr for an empty file
  size_t size() const { return size_; }
  const std::string &path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace vegas
