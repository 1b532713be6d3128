// libFuzzer target: config.json parsing (parse_model_config) on arbitrary
// text. Bad input must end in a vegas::Error; an accepted config must have the
// positive, consistent sizes the rest of the runtime divides and multiplies by.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(reinterpret_cast<const char *>(data), size);
  try {
    const vegas::ModelConfig c = vegas::parse_model_config(text, "fuzz/config.json");
    if (c.hidden_size <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 ||
        c.head_dim <= 0 || c.vocab_size <= 0 || c.intermediate_size <= 0)
      std::abort();                                   // accepted a non-positive size
    if (c.n_heads % c.n_kv_heads != 0) std::abort();  // accepted heads that do not group
    (void)c.q_dim();
    (void)c.kv_dim();
  } catch (const vegas::Error &) {
  }
  return 0;
}
