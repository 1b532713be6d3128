// Small helpers shared by the CLI subcommands.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "vegas.h"

namespace vegas_cli {

// Handles that free themselves.
using ModelPtr = std::unique_ptr<vegas_model, void (*)(vegas_model *)>;
using SessionPtr = std::unique_ptr<vegas_session, void (*)(vegas_session *)>;

// Prints "vegas: <STATUS>: <message>" and ends the command with a non-zero exit.
inline void check(vegas_status status, const char *what) {
  if (status == VEGAS_OK) return;
  std::fprintf(stderr, "vegas: %s: %s: %s\n", what, vegas_status_name(status), vegas_last_error());
  throw CLI::RuntimeError(1);
}

// The whole of an input file the user named (a prompt, text to tokenize), or
// "vegas: VEGAS_ERR_IO: ..." and a non-zero exit: only a regular file of at
// most 1 GB is read (a FIFO blocked, /dev/zero ran the process out of memory).
// "-" is standard input, read to its end (at most 1 GB too).
inline std::string read_input_file(const std::string &path, const char *what) {
  constexpr std::uintmax_t kMaxBytes = std::uintmax_t{1} << 30;
  if (path == "-") {
    std::string all;
    char buf[1 << 16];
    for (size_t got; (got = std::fread(buf, 1, sizeof buf, stdin)) > 0;) {
      all.append(buf, got);
      if (all.size() > kMaxBytes) {
        std::fprintf(stderr, "vegas: VEGAS_ERR_IO: %s from standard input: more than 1 GB\n", what);
        throw CLI::RuntimeError(1);
      }
    }
    if (std::ferror(stdin)) {
      std::fprintf(stderr, "vegas: VEGAS_ERR_IO: cannot read %s from standard input\n", what);
      throw CLI::RuntimeError(1);
    }
    return all;
  }
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  const bool regular = std::filesystem::is_regular_file(path, ec);
  const std::uintmax_t size = regular ? std::filesystem::file_size(path, ec) : 0;
  std::ifstream in;
  if (regular && !ec && size <= kMaxBytes) in.open(path, std::ios::binary);
  if (!in.is_open()) {
    std::fprintf(stderr, "vegas: VEGAS_ERR_IO: cannot read %s '%s'%s\n", what, path.c_str(),
                 !exists            ? " (no such file)"
                 : !regular         ? " (not a regular file)"
                 : size > kMaxBytes ? " (more than 1 GB)"
                                    : "");
    throw CLI::RuntimeError(1);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline int32_t parse_backend(const std::string &name) {
  if (name == "cpu") return VEGAS_BACKEND_CPU;
  if (name == "cuda") return VEGAS_BACKEND_CUDA;
  return VEGAS_BACKEND_AUTO;
}

inline const char *backend_name(int32_t kind) {
  return kind == VEGAS_BACKEND_CUDA ? "cuda" : kind == VEGAS_BACKEND_CPU ? "cpu" : "auto";
}

}  // namespace vegas_cli
