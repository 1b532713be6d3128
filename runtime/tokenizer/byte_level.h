// GPT-2's reversible byte <-> printable character mapping (the ByteLevel
// pre-tokenizer and decoder of Hugging Face tokenizers).
#pragma once

#include <string>
#include <string_view>

namespace vegas::byte_level {

// Appends the mapped characters of each byte of `bytes` to `out`.
void encode(std::string_view bytes, std::string &out);

// Maps every character of `token` back to its byte. Returns false (and leaves
// `out` in an unspecified state) when a character is outside the mapping, as
// the ByteLevel decoder then keeps the token's own UTF-8 bytes.
bool decode(std::string_view token, std::string &out);

}  // namespace vegas::byte_level
