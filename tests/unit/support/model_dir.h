// Where the embedded model is: VEGAS_MODEL_DIR when set and not empty (the
// device machine sets it), else the source tree's models/vegas-code-22m.
#pragma once

#include <cstdlib>
#include <string>

namespace vegas::test {

inline std::string embedded_model_dir() {
  if (const char *v = std::getenv("VEGAS_MODEL_DIR"); v != nullptr && *v != '\0') return v;
  return std::string(VEGAS_SOURCE_DIR) + "/models/vegas-code-22m";
}

}  // namespace vegas::test
