// Shared by the fuzz targets that need a real tokenizer: the 22m model's
// tokenizer, loaded once per process through the public C API.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "vegas.h"

namespace vegas::fuzz {

inline const vegas_tokenizer *model_tokenizer() {
  static const vegas_tokenizer *tok = [] {
    vegas_tokenizer *t = nullptr;
    const std::string dir = std::string(VEGAS_SOURCE_DIR) + "/models/vegas-code-22m";
    if (vegas_tokenizer_load(dir.c_str(), &t) != VEGAS_OK) {
      std::fprintf(stderr, "cannot load %s: %s\n", dir.c_str(), vegas_last_error());
      std::abort();
    }
    return t;
  }();
  return tok;
}

}  // namespace vegas::fuzz
