// Opening and reading files named by paths the library does not trust: a
// FIFO made the open wait for a writer forever and /dev/zero read until
// memory ran out (issue P1, hostile files). Only a regular file is opened
// (MappedFile maps what open_regular_file opened), and read_small_file reads
// one of at most `max_bytes`.
#pragma once

#include <cstddef>
#include <string>

namespace vegas {

// An open regular file, closed on destruction.
class RegularFile {
 public:
  RegularFile(int fd, size_t size) : fd_(fd), size_(size) {}
  RegularFile(RegularFile &&other) noexcept : fd_(other.fd_), size_(other.size_) { other.fd_ = -1; }
  RegularFile &operator=(RegularFile &&) = delete;
  RegularFile(const RegularFile &) = delete;
  RegularFile &operator=(const RegularFile &) = delete;
  ~RegularFile();
  int fd() const { return fd_; }
  size_t size() const { return size_; }
  // Hands the descriptor over (this object closes nothing afterwards).
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
  size_t size_;
};

// Throws IO "cannot <verb> <what> '<path>': <strerror(err)>" (`what` may be
// empty: "cannot <verb> '<path>': ...").
[[noreturn]] void fail_file_io(const char *verb, const std::string &what, const std::string &path,
                               int err);

// Opens `path` without blocking (a FIFO with no writer would) and throws IO
// unless it is a regular file (FIFOs, devices, directories; a symlink counts
// as its target). `what` names the file in messages, or is empty.
RegularFile open_regular_file(const std::string &path, const std::string &what);

// The bytes of a regular file (open_regular_file's errors), FORMAT when it
// holds more than max_bytes. `what`: "model config", "tokenizer.json", ...
std::string read_small_file(const std::string &path, size_t max_bytes, const std::string &what);

}  // namespace vegas
