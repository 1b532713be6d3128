#include "model/mapped_file.h"

#include <sys/mman.h>

#include <cerrno>

#include "common/small_file.h"

namespace vegas {

std::unique_ptr<MappedFile> MappedFile::open(const std::string &path) {
  // Refuses FIFOs without blocking on them, devices and directories (issue
  // P1, hostile files); the descriptor closes here, the mapping outlives it.
  const RegularFile fd = open_regular_file(path, "");
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = fd.size();
  if (file->size_ == 0) return file;  // mmap rejects length 0; callers see size() == 0
  void *p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd.fd(), 0);
  if (p == MAP_FAILED) fail_file_io("map", "", path, errno);
  file->data_ = static_cast<const uint8_t *>(p);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t *>(data_), size_);
}

}  // namespace vegas
