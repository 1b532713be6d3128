#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/split_regex.h"

#include <pcre2.h>

#include <new>

#include "common/error.h"
#include "tokenizer/utf8.h"

namespace vegas {

struct SplitRegex::Impl {
  pcre2_code *code = nullptr;
  bool jit = false;
};

namespace {

// Match data is per thread (pcre2_match_data is not shareable); sized for the
// whole-match pair, which is all the splitter reads.
struct ThreadMatchData {
  pcre2_match_data *data = pcre2_match_data_create(1, nullptr);
  ~ThreadMatchData() { pcre2_match_data_free(data); }
};

pcre2_match_data *thread_match_data() {
  thread_local ThreadMatchData md;
  if (md.data == nullptr) throw std::bad_alloc();
  return md.data;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char *>(buf);
}

// Runs one search from `offset`; returns false on no match.
bool search(const pcre2_code *code, std::string_view text, size_t offset, uint32_t options,
            size_t *start, size_t *end) {
  pcre2_match_data *md = thread_match_data();
  const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), offset,
                             options | PCRE2_NO_UTF_CHECK, md, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) fail(VEGAS_ERR_INTERNAL, "pre-tokenizer regex failed: " + pcre2_message(rc));
  const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
  *start = ov[0];
  *end = ov[1];
  return true;
}

}  // namespace

std::string oniguruma_to_pcre2(const std::string &pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 'h') {
        out += in_class ? "0-9a-fA-F" : "[0-9a-fA-F]";
      } else if (e == 'H') {
        out += in_class ? "\\x00-/:-@G-`g-\\x{10FFFF}" : "[^0-9a-fA-F]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[') in_class = true;
    if (c == ']') in_class = false;
    if (!in_class && c == '(' && i + 1 < pattern.size() && pattern[i + 1] == '?') {
      // Inline flags "(?imx-imx)" / "(?imx-imx:": Ruby's m is PCRE2's s.
      size_t j = i + 2;
      while (j < pattern.size() && std::string_view("imx-").find(pattern[j]) != std::string::npos)
        ++j;
      if (j > i + 2 && j < pattern.size() && (pattern[j] == ':' || pattern[j] == ')')) {
        out += "(?";
        for (size_t k = i + 2; k < j; ++k) out += pattern[k] == 'm' ? 's' : pattern[k];
        i = j - 1;
        continue;
      }
    }
    out += c;
  }
  return out;
}

SplitRegex::SplitRegex(const std::string &oniguruma_pattern, const std::string &where)
    : impl_(std::make_unique<Impl>()) {
  const std::string pattern = oniguruma_to_pcre2(oniguruma_pattern);
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  // Ruby's ^ and $ are line anchors: PCRE2_MULTILINE.
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &err_offset, nullptr);
  if (impl_->code == nullptr)
    fail(VEGAS_ERR_FORMAT, where + ": regex does not compile at offset " +
                               std::to_string(err_offset) + ": " + pcre2_message(err));
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

SplitRegex::~SplitRegex() {
  pcre2_code_free(impl_->code);
}

std::vector<std::pair<size_t, size_t>> SplitRegex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  size_t from = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (from <= text.size()) {
    size_t s = 0, e = 0;
    if (!search(impl_->code, text, from, 0, &s, &e)) break;
    if (s == e && have_last && last_end == e) {
      if (from >= text.size()) break;
      size_t next = from;
      utf8::next_codepoint(text, next);
      from = next;
      continue;
    }
    matches.emplace_back(s, e);
    from = e;
    last_end = e;
    have_last = true;
  }
  return matches;
}

bool SplitRegex::full_match(std::string_view text) const {
  size_t s = 0, e = 0;
  return search(impl_->code, text, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, &s, &e);
}

}  // namespace vegas
