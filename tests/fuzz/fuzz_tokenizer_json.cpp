// libFuzzer target: tokenizer.json loading (Tokenizer::from_json) on arbitrary
// text. Bad input must end in a vegas::Error; an accepted tokenizer must then
// encode a fixed text and decode the ids back without crashing, every id in
// [0, vocab_size).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string json(reinterpret_cast<const char *>(data), size);
  try {
    auto tok = vegas::Tokenizer::from_json(json, "");
    const std::vector<int32_t> ids =
        tok->encode("def f(x):\n  return x  # héllo 123 <|endoftext|>\xff", true, true);
    for (int32_t id : ids)
      if (id < 0 || id >= tok->vocab_size()) std::abort();  // encode made an invalid id
    (void)tok->decode(ids.data(), ids.size(), false);
    (void)tok->decode(ids.data(), ids.size(), true);
  } catch (const vegas::Error &) {
  }
  return 0;
}
