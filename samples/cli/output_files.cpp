#include "output_files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <CLI/CLI.hpp>

namespace vegas_cli {

namespace {

[[noreturn]] void fail(const char *command, const std::string &message) {
  std::fprintf(stderr, "%s: %s\n", command, message.c_str());
  throw CLI::RuntimeError(1);
}

}  // namespace

std::string parent_dir(const std::string &path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

void check_writable_dir(const std::string &dir, const char *command, const char *what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    fail(command,
         std::string("cannot create the directory of ") + what + " " + dir + ": " + ec.message());
  const std::string probe = dir + "/.vegas-write-check";
  {
    std::ofstream out(probe, std::ios::binary | std::ios::trunc);
    if (!out)
      fail(command,
           std::string("cannot write ") + what + " in " + dir + ": " + std::strerror(errno));
  }
  std::filesystem::remove(probe, ec);
}

void write_file_atomically(const std::string &path, const std::string &text, const char *command) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) fail(command, "cannot write " + tmp + ": " + std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    fail(command, "cannot write " + path + ": " + why);
  }
}

}  // namespace vegas_cli
