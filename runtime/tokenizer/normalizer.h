// The tokenizer.json normalizer: null, a Unicode normalization form (NFC, NFD,
// NFKC, NFKD through utf8proc), or a Sequence of them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace vegas {

class Normalizer {
 public:
  // `spec` is the JSON value of "normalizer" (may be null). Throws UNSUPPORTED
  // naming an unknown type, FORMAT for a malformed entry.
  explicit Normalizer(const nlohmann::json &spec);

  bool is_identity() const { return forms_.empty(); }
  // `text` must be valid UTF-8.
  std::string apply(std::string_view text) const;

  // One form (utf8proc options) applied to valid UTF-8 text: utf8proc_map's
  // result in O(n log n) time whatever the text (normalizer.cpp says why).
  static std::string normalize(std::string_view text, int options);

 private:
  std::vector<int> forms_;  // utf8proc option sets, applied in order
};

}  // namespace vegas
