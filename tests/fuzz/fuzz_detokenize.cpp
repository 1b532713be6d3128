// libFuzzer target: vegas_detokenize and the streaming detokenizer on
// arbitrary ids (in range, and out of range on purpose). Out-of-range ids must
// be TOKEN_OUT_OF_RANGE; otherwise every piece the stream returns and the
// batch decode must be valid UTF-8, and the stream must never fail.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "tokenizer/utf8.h"

namespace {

bool valid(const std::string &s) {
  return vegas::utf8::is_valid(s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const vegas_tokenizer *tok = vegas::fuzz::model_tokenizer();
  const int32_t vocab = vegas_tokenizer_vocab_size(tok);
  if (size < 1) return 0;
  const int32_t skip_special = data[0] & 1;
  // Two bytes per id: mostly in range, the top values past the vocabulary.
  std::vector<int32_t> ids;
  bool out_of_range = false;
  for (size_t i = 1; i + 1 < size; i += 2) {
    const uint16_t raw = static_cast<uint16_t>(data[i] | (data[i + 1] << 8));
    int32_t id = raw % (vocab + 16);
    if (raw == 0xFFFF) id = -1;
    if (id >= vocab || id < 0) out_of_range = true;
    ids.push_back(id);
  }
  size_t n = 0;
  const vegas_status need =
      vegas_detokenize(tok, ids.data(), ids.size(), skip_special, nullptr, 0, &n);
  if (out_of_range) {
    if (need != VEGAS_ERR_TOKEN_OUT_OF_RANGE) std::abort();
  } else {
    std::string text(n, '\0');
    size_t n2 = 0;
    if (vegas_detokenize(tok, ids.data(), ids.size(), skip_special, text.data(), n, &n2) !=
            VEGAS_OK ||
        n2 != n || !valid(text))
      std::abort();
  }

  vegas_detokenizer *stream = nullptr;
  if (vegas_detokenizer_create(tok, skip_special, &stream) != VEGAS_OK) std::abort();
  char buf[256];
  for (int32_t id : ids) {
    size_t got = 0;
    const vegas_status s = vegas_detokenizer_push(stream, id, buf, sizeof buf, &got);
    if (id < 0 || id >= vocab) {
      if (s != VEGAS_ERR_TOKEN_OUT_OF_RANGE) std::abort();
      continue;
    }
    if (s == VEGAS_ERR_BUFFER_TOO_SMALL) {
      std::vector<char> big(got);
      if (vegas_detokenizer_push(stream, id, big.data(), got, &got) != VEGAS_OK) std::abort();
      if (!valid(std::string(big.data(), got))) std::abort();
    } else if (s != VEGAS_OK || !valid(std::string(buf, got))) {
      std::abort();
    }
  }
  size_t got = 0;
  if (vegas_detokenizer_flush(stream, buf, sizeof buf, &got) != VEGAS_OK) std::abort();
  if (!valid(std::string(buf, got))) std::abort();
  vegas_detokenizer_free(stream);
  return 0;
}
