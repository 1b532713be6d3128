// Small helpers shared by the CLI subcommands.
#pragma once

#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "vegas.h"

namespace vegas_cli {

// Prints "vegas: <STATUS>: <message>" and ends the command with a non-zero exit.
inline void check(vegas_status status, const char *what) {
  if (status == VEGAS_OK) return;
  std::fprintf(stderr, "vegas: %s: %s: %s\n", what, vegas_status_name(status), vegas_last_error());
  throw CLI::RuntimeError(1);
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
