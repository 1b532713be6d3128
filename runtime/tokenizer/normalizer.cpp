#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstddef>
#include <new>
#include <vector>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace vegas {

namespace {

void add_forms(const nlohmann::json &spec, std::vector<int> &forms) {
  if (spec.is_null()) return;
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string())
    fail(VEGAS_ERR_FORMAT, "tokenizer.json: normalizer has no \"type\"");
  const std::string type = spec["type"].get<std::string>();
  if (type == "Sequence") {
    if (!spec.contains("normalizers") || !spec["normalizers"].is_array())
      fail(VEGAS_ERR_FORMAT, "tokenizer.json: normalizer Sequence has no \"normalizers\" array");
    for (const auto &sub : spec["normalizers"]) add_forms(sub, forms);
  } else if (type == "NFC") {
    forms.push_back(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  } else if (type == "NFD") {
    forms.push_back(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  } else if (type == "NFKC") {
    forms.push_back(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  } else if (type == "NFKD") {
    forms.push_back(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  } else {
    fail(VEGAS_ERR_UNSUPPORTED,
         "tokenizer.json: normalizer type \"" + type + "\" is not supported");
  }
}

}  // namespace

Normalizer::Normalizer(const nlohmann::json &spec) {
  add_forms(spec, forms_);
}

std::string Normalizer::apply(std::string_view text) const {
  std::string current(text);
  for (int options : forms_) {
    // Pure ASCII is invariant under every normalization form.
    bool ascii = true;
    for (char c : current) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    if (!ascii) current = normalize(current, options);
  }
  return current;
}

// utf8proc_map's result, in O(n log n): utf8proc orders each run of
// combining marks by a gnome sort, quadratic in the run's length ('a' and
// 100 KB of alternating U+0301 U+0316 took 8 s). Here each code point is
// decomposed by utf8proc, each maximal run of non-starters is stable-sorted by
// combining class (the canonical ordering algorithm, which the gnome sort
// implements), and utf8proc composes (linear) and encodes.
std::string Normalizer::normalize(std::string_view text, int options) {
  const auto opt = static_cast<utf8proc_option_t>(options);
  auto check = [](utf8proc_ssize_t n) {
    if (n == UTF8PROC_ERROR_NOMEM) throw std::bad_alloc();
    if (n < 0) fail(VEGAS_ERR_INTERNAL, std::string("normalizer: ") + utf8proc_errmsg(n));
    return n;
  };
  std::vector<utf8proc_int32_t> cps;
  cps.reserve(text.size() + 1);
  const auto *bytes = reinterpret_cast<const utf8proc_uint8_t *>(text.data());
  const auto size = static_cast<utf8proc_ssize_t>(text.size());
  int boundclass = UTF8PROC_BOUNDCLASS_START;
  for (utf8proc_ssize_t pos = 0; pos < size;) {
    utf8proc_int32_t cp = 0;
    pos += check(utf8proc_iterate(bytes + pos, size - pos, &cp));
    const size_t at = cps.size();
    cps.resize(at + 4);
    utf8proc_ssize_t n = check(utf8proc_decompose_char(cp, cps.data() + at, 4, opt, &boundclass));
    if (n > 4) {  // a long compatibility decomposition: again with room for it
      cps.resize(at + static_cast<size_t>(n));
      n = check(utf8proc_decompose_char(cp, cps.data() + at, n, opt, &boundclass));
    }
    cps.resize(at + static_cast<size_t>(n));
  }
  auto ccc = [](utf8proc_int32_t cp) { return utf8proc_get_property(cp)->combining_class; };
  for (size_t i = 0; i < cps.size();) {
    if (ccc(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < cps.size() && ccc(cps[end]) != 0) ++end;
    if (end - i > 1)
      std::stable_sort(cps.begin() + static_cast<std::ptrdiff_t>(i),
                       cps.begin() + static_cast<std::ptrdiff_t>(end),
                       [&](utf8proc_int32_t a, utf8proc_int32_t b) { return ccc(a) < ccc(b); });
    i = end;
  }
  // utf8proc_reencode writes UTF-8 over the UTF-32 buffer and needs one spare byte.
  const auto length = static_cast<utf8proc_ssize_t>(cps.size());
  cps.push_back(0);
  const utf8proc_ssize_t n = check(utf8proc_reencode(cps.data(), length, opt));
  return std::string(reinterpret_cast<const char *>(cps.data()), static_cast<size_t>(n));
}

}  // namespace vegas
