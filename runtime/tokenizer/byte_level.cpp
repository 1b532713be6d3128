#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "tokenizer/utf8.h"

namespace vegas::byte_level {

namespace {

// bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68
// bytes to U+0100 upwards in byte order.
struct Tables {
  std::array<std::string, 256> byte_to_utf8;
  std::array<int16_t, 0x180> codepoint_to_byte;  // every mapped code point is < 0x144

  Tables() {
    codepoint_to_byte.fill(-1);
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t cp =
          printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
      utf8::append_codepoint(byte_to_utf8[b], cp);
      codepoint_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables &tables() {
  static const Tables t;
  return t;
}

}  // namespace

void encode(std::string_view bytes, std::string &out) {
  const Tables &t = tables();
  for (char c : bytes) out += t.byte_to_utf8[static_cast<unsigned char>(c)];
}

bool decode(std::string_view token, std::string &out) {
  const Tables &t = tables();
  for (size_t pos = 0; pos < token.size();) {
    size_t bad = 0;
    if (utf8::valid_char_len(token, pos, &bad) == 0) return false;
    const char32_t cp = utf8::next_codepoint(token, pos);
    if (cp >= t.codepoint_to_byte.size() || t.codepoint_to_byte[cp] < 0) return false;
    out.push_back(static_cast<char>(t.codepoint_to_byte[cp]));
  }
  return true;
}

}  // namespace vegas::byte_level
