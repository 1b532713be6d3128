#include "tokenizer/utf8.h"

namespace vegas::utf8 {

namespace {

// Valid second-byte range for a lead byte (Unicode Table 3-7); the other
// continuation bytes are always 80..BF.
bool second_byte_ok(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // 80..C1 and F5..FF never start a character
}

}  // namespace

size_t valid_char_len(std::string_view s, size_t pos, size_t *subpart) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  const size_t need = sequence_length(lead);
  if (need == 1) return 1;
  size_t got = 1;
  if (need != 0) {
    for (; got < need && pos + got < s.size(); ++got) {
      const auto b = static_cast<unsigned char>(s[pos + got]);
      const bool ok = got == 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
      if (!ok) break;
    }
    if (got == need) return need;
  }
  if (subpart != nullptr) *subpart = got;
  return 0;
}

bool is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = valid_char_len(s, i, nullptr);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string lossy(std::string_view s) {
  if (is_valid(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    size_t bad = 0;
    const size_t n = valid_char_len(s, i, &bad);
    if (n != 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.append(kReplacement);
      i += bad;
    }
  }
  return out;
}

size_t incomplete_tail(std::string_view s) {
  // A truncated character is at most 3 bytes long: look back that far for its lead.
  const size_t lookback = s.size() < 3 ? s.size() : 3;
  for (size_t k = 1; k <= lookback; ++k) {
    const size_t pos = s.size() - k;
    const auto b = static_cast<unsigned char>(s[pos]);
    if (b >= 0x80 && b <= 0xBF) continue;  // continuation byte: keep looking for the lead
    const size_t need = sequence_length(b);
    if (need <= k) return 0;  // ASCII, invalid lead, or a character that is already whole
    size_t bad = 0;
    valid_char_len(s, pos, &bad);
    return bad == k ? k : 0;  // the tail is a valid prefix only if every byte so far fits
  }
  return 0;
}

char32_t next_codepoint(std::string_view s, size_t &pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  const size_t n = sequence_length(b0);
  char32_t cp = b0 & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + k]) & 0x3F);
  pos += n;
  return cp;
}

char32_t prev_codepoint(std::string_view s, size_t end, size_t *start) {
  size_t pos = end - 1;
  while (pos > 0 && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) --pos;
  if (start != nullptr) *start = pos;
  return next_codepoint(s, pos);
}

void append_codepoint(std::string &out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace vegas::utf8
