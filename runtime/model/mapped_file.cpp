#include "model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace vegas {

namespace {

// Closes the descriptor on every path out of open(); the mapping outlives it.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void io_fail(const std::string &what, const std::string &path, int err) {
  fail(VEGAS_ERR_IO, "cannot " + what + " '" + path + "': " + std::strerror(err));
}

}  // namespace

std::unique_ptr<MappedFile> MappedFile::open(const std::string &path) {
  // O_NONBLOCK: a FIFO with no writer would block the open; the type check
  // below refuses it (issue P1, hostile files).
  FdCloser fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (fd.fd < 0) io_fail("open", path, errno);
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) io_fail("stat", path, errno);
  if (!S_ISREG(st.st_mode)) fail(VEGAS_ERR_IO, "'" + path + "' is not a regular file");

  std::unique_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ == 0) return file;  // mmap rejects length 0; callers see size() == 0
  void *p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (p == MAP_FAILED) io_fail("map", path, errno);
  file->data_ = static_cast<const uint8_t *>(p);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t *>(data_), size_);
}

}  // namespace vegas
