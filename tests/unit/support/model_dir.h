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

#ifdef VEGAS_GGUF_TINY_DIR
// The GGUF files of tests/fixtures/gguf/tiny-models.tar.xz, which CMake
// unpacks into the build tree; VEGAS_GGUF_TINY_DIR overrides it.
inline std::string gguf_tiny_file(const std::string &name) {
  const char *v = std::getenv("VEGAS_GGUF_TINY_DIR");
  return std::string(v != nullptr && *v != '\0' ? v : VEGAS_GGUF_TINY_DIR) + "/" + name + ".gguf";
}
#endif

}  // namespace vegas::test
