#include "common/small_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace vegas {

namespace {

// "<what> '<path>'", or "'<path>'" without a what.
std::string file_name(const std::string &what, const std::string &path) {
  return (what.empty() ? "" : what + " ") + "'" + path + "'";
}

}  // namespace

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

void fail_file_io(const char *verb, const std::string &what, const std::string &path, int err) {
  fail(VEGAS_ERR_IO,
       "cannot " + std::string(verb) + " " + file_name(what, path) + ": " + std::strerror(err));
}

RegularFile open_regular_file(const std::string &path, const std::string &what) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of
  // waiting; the type check below refuses it.
  RegularFile file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK), 0);
  if (file.fd() < 0) fail_file_io("open", what, path, errno);
  struct stat st {};
  if (::fstat(file.fd(), &st) != 0) fail_file_io("stat", what, path, errno);
  if (!S_ISREG(st.st_mode)) fail(VEGAS_ERR_IO, file_name(what, path) + " is not a regular file");
  return RegularFile(file.release(), static_cast<size_t>(st.st_size));
}

std::string read_small_file(const std::string &path, size_t max_bytes, const std::string &what) {
  const RegularFile file = open_regular_file(path, what);
  if (file.size() > max_bytes)
    fail(VEGAS_ERR_FORMAT, file_name(what, path) + " is " + std::to_string(file.size()) +
                               " bytes, more than the " + std::to_string(max_bytes) +
                               " such a file may hold");
  std::string text(file.size(), '\0');
  size_t done = 0;
  while (done < file.size()) {
    const ssize_t n = ::read(file.fd(), &text[done], file.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_file_io("read", what, path, errno);
    if (n == 0) break;  // shrank while read: keep what is there
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

}  // namespace vegas
