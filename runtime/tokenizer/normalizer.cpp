#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <new>
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
    if (ascii) continue;
    utf8proc_uint8_t *out = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t *>(current.data()),
                     static_cast<utf8proc_ssize_t>(current.size()), &out,
                     static_cast<utf8proc_option_t>(options));
    if (n < 0) {
      if (n == UTF8PROC_ERROR_NOMEM) throw std::bad_alloc();
      fail(VEGAS_ERR_INTERNAL, std::string("normalizer: ") + utf8proc_errmsg(n));
    }
    current.assign(reinterpret_cast<const char *>(out), static_cast<size_t>(n));
    std::free(out);
  }
  return current;
}

}  // namespace vegas
