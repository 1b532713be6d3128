// UTF-8 helpers with the exact replacement rule of Python's
// bytes.decode('utf-8', errors='replace') and Rust's String::from_utf8_lossy:
// each maximal subpart of an ill-formed sequence becomes one U+FFFD.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace vegas::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence starting at `pos`, or 0 when the bytes
// there are not a complete valid character. `*subpart` (if non-null) receives
// the length of the maximal subpart to replace when the result is 0: at least 1,
// or the length of a valid-but-truncated prefix.
size_t valid_char_len(std::string_view s, size_t pos, size_t *subpart);

bool is_valid(std::string_view s);

// `s` with every ill-formed subsequence replaced by U+FFFD.
std::string lossy(std::string_view s);

// Number of trailing bytes of `s` that start a valid character but stop before
// its end (0..3): the part a streaming decoder must hold back.
size_t incomplete_tail(std::string_view s);

// Decodes the character at `pos` of valid UTF-8; advances `pos`.
char32_t next_codepoint(std::string_view s, size_t &pos);
// Decodes the character ending at `end` of valid UTF-8 (end > 0).
char32_t prev_codepoint(std::string_view s, size_t end, size_t *start);
void append_codepoint(std::string &out, char32_t cp);

}  // namespace vegas::utf8
