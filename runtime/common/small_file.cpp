#include "common/small_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace vegas {

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void io_fail(const std::string &what, const std::string &path, const char *verb,
                          int err) {
  fail(VEGAS_ERR_IO,
       "cannot " + std::string(verb) + " " + what + " '" + path + "': " + std::strerror(err));
}

}  // namespace

std::string read_small_file(const std::string &path, size_t max_bytes, const std::string &what) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of
  // waiting; the type check below refuses it.
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) io_fail(what, path, "open", errno);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) io_fail(what, path, "stat", errno);
  if (!S_ISREG(st.st_mode)) fail(VEGAS_ERR_IO, what + " '" + path + "' is not a regular file");
  const auto size = static_cast<size_t>(st.st_size);
  if (size > max_bytes)
    fail(VEGAS_ERR_FORMAT, what + " '" + path + "' is " + std::to_string(size) +
                               " bytes, more than the " + std::to_string(max_bytes) +
                               " such a file may hold");
  std::string text(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(f.fd, &text[done], size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_fail(what, path, "read", errno);
    if (n == 0) break;  // shrank while read: keep what is there
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

}  // namespace vegas
