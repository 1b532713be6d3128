// libFuzzer target: vegas_tokenize on arbitrary bytes (invalid UTF-8, NULs,
// special-token text) with the real tokenizer, through the C API. It must
// succeed, every id must be in [0, vocab_size), and a short buffer must report
// the same count without writing past it; decoding the ids must succeed too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const vegas_tokenizer *tok = vegas::fuzz::model_tokenizer();
  const int32_t vocab = vegas_tokenizer_vocab_size(tok);
  const char *text = reinterpret_cast<const char *>(data);
  for (int32_t parse_special = 0; parse_special <= 1; ++parse_special) {
    vegas_tokenize_options options;
    vegas_tokenize_options_init(&options);
    options.parse_special = parse_special;
    size_t n = 0;
    const vegas_status count = vegas_tokenize(tok, text, size, &options, nullptr, 0, &n);
    if (count != VEGAS_OK && count != VEGAS_ERR_BUFFER_TOO_SMALL) std::abort();
    std::vector<int32_t> ids(n + 1, -7);
    size_t n2 = 0;
    if (vegas_tokenize(tok, text, size, &options, ids.data(), n, &n2) != VEGAS_OK) std::abort();
    if (n2 != n || ids[n] != -7) std::abort();  // count changed or wrote past capacity
    for (size_t i = 0; i < n; ++i)
      if (ids[i] < 0 || ids[i] >= vocab) std::abort();
    size_t bytes = 0;
    if (vegas_detokenize(tok, ids.data(), n, 0, nullptr, 0, &bytes) == VEGAS_ERR_TOKEN_OUT_OF_RANGE)
      std::abort();
  }
  return 0;
}
