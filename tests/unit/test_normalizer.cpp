// The tokenizer's Unicode normalization (runtime/tokenizer/normalizer.cpp)
// against utf8proc_map, which it replaces for its quadratic canonical
// ordering: the same bytes for every form on random text built from the code
// points where normalization does something (combining marks of many classes,
// precomposed and decomposed letters, Hangul syllables and jamo, singletons,
// compatibility characters), and linear-ish time on a long run of
// alternating combining marks (8 s for 100 KB with utf8proc_map).
#include <utf8proc.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/normalizer.h"

namespace vegas {
namespace {

constexpr int kForms[] = {
    UTF8PROC_STABLE | UTF8PROC_COMPOSE,                      // NFC
    UTF8PROC_STABLE | UTF8PROC_DECOMPOSE,                    // NFD
    UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT,    // NFKC
    UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT,  // NFKD
};

std::string utf8(char32_t cp) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  return std::string(reinterpret_cast<const char *>(buf), static_cast<size_t>(n));
}

std::string reference(const std::string &text, int options) {
  utf8proc_uint8_t *out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t *>(text.data()),
                              static_cast<utf8proc_ssize_t>(text.size()), &out,
                              static_cast<utf8proc_option_t>(options));
  EXPECT_GE(n, 0);
  std::string s(reinterpret_cast<const char *>(out), n < 0 ? 0 : static_cast<size_t>(n));
  std::free(out);
  return s;
}

TEST(Normalizer, MatchesUtf8procOnRandomText) {
  const std::vector<char32_t> pool = {
      'a',     'e',    'o',    'A',    ' ',    '\n',   'x',    0x0301, 0x0300,
      0x0316,  0x0327, 0x0323, 0x031B, 0x05B0, 0x0F71, 0x0F72, 0x0F80,  // marks
      0x0344,  0x0F73, 0x0958,                  // decompose into several / excluded
      0x00E9,  0x00C5, 0x1E69, 0x01D5, 0x0390,  // precomposed
      0x212B,  0x2126, 0x0340,                  // singletons
      0xAC00,  0xAC01, 0x1100, 0x1161, 0x11A8,  // Hangul syllables and jamo
      0xFB01,  0x2460, 0xFDFA, 0x3300, 0xFF21,  // compatibility
      0x1F600, 0x4E2D, 0x0627, 0x064B, 0x0651};
  std::mt19937 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text;
    const int len = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) text += utf8(pool[rng() % pool.size()]);
    for (int form : kForms)
      ASSERT_EQ(Normalizer::normalize(text, form), reference(text, form))
          << "form " << form << " trial " << trial;
  }
}

std::string alternating_marks(int pairs) {
  std::string text = "a";
  for (int i = 0; i < pairs; ++i) text += utf8(0x0301) + utf8(0x0316);
  return text;
}

TEST(Normalizer, LongMarkRunsMatchUtf8proc) {
  for (int form : kForms)
    EXPECT_EQ(Normalizer::normalize(alternating_marks(2000), form),
              reference(alternating_marks(2000), form));
}

// 'a' + 50,000 pairs of U+0301 U+0316 (200 KB): utf8proc_map's ordering is
// quadratic here (~30 s); this must take well under a second. The bound is
// loose for slow CI machines and sanitizers; the result is checked too.
TEST(Normalizer, LongMarkRunIsNotQuadratic) {
  const std::string text = alternating_marks(50000);
  const Normalizer nfc(nlohmann::json{{"type", "NFC"}});
  const auto start = std::chrono::steady_clock::now();
  const std::string out = nfc.apply(text);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
  // Canonical order puts the class-220 marks first; then U+0301 (230) is not
  // blocked and composes with 'a'.
  std::string want = utf8(0x00E1);
  for (int i = 0; i < 50000; ++i) want += utf8(0x0316);
  for (int i = 1; i < 50000; ++i) want += utf8(0x0301);
  EXPECT_TRUE(out == want) << "normalized text differs (" << out.size() << " bytes)";
}

}  // namespace
}  // namespace vegas
