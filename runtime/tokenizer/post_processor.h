// The tokenizer.json post_processor, single-sequence part: null, ByteLevel
// (offsets only, no ids), TemplateProcessing, or a Sequence of them.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace vegas {

class PostProcessor {
 public:
  // Throws UNSUPPORTED naming an unknown type, FORMAT for a malformed template.
  explicit PostProcessor(const nlohmann::json &spec);

  // True when the file's post_processor adds tokens (a TemplateProcessing).
  bool has_template() const { return has_template_; }
  // Wraps `ids` with the template's special tokens.
  std::vector<int32_t> apply(const std::vector<int32_t> &ids) const;

 private:
  void add(const nlohmann::json &spec);

  bool has_template_ = false;
  // The "single" template: ids to insert, with the sequence marked by an empty entry.
  std::vector<std::vector<int32_t>> pieces_;
  std::vector<bool> is_sequence_;
};

}  // namespace vegas
