#include "tokenizer/post_processor.h"

#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"

namespace vegas {

PostProcessor::PostProcessor(const nlohmann::json &spec) {
  add(spec);
}

void PostProcessor::add(const nlohmann::json &spec) {
  if (spec.is_null()) return;
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string())
    fail(VEGAS_ERR_FORMAT, "tokenizer.json: post_processor has no \"type\"");
  const std::string type = spec["type"].get<std::string>();
  if (type == "ByteLevel") return;  // changes offsets only
  if (type == "Sequence") {
    if (!spec.contains("processors") || !spec["processors"].is_array())
      fail(VEGAS_ERR_FORMAT, "tokenizer.json: post_processor Sequence has no \"processors\"");
    for (const auto &sub : spec["processors"]) add(sub);
    return;
  }
  if (type != "TemplateProcessing")
    fail(VEGAS_ERR_UNSUPPORTED,
         "tokenizer.json: post_processor type \"" + type + "\" is not supported");
  if (has_template_)
    fail(VEGAS_ERR_UNSUPPORTED, "tokenizer.json: more than one TemplateProcessing");
  has_template_ = true;
  const auto &single = spec.at("single");
  const auto &specials = spec.at("special_tokens");
  for (const auto &piece : single) {
    if (piece.contains("Sequence")) {
      pieces_.emplace_back();
      is_sequence_.push_back(true);
    } else if (piece.contains("SpecialToken")) {
      const std::string name = piece["SpecialToken"].at("id").get<std::string>();
      if (!specials.contains(name))
        fail(VEGAS_ERR_FORMAT, "tokenizer.json: TemplateProcessing special token \"" + name +
                                   "\" is not in special_tokens");
      pieces_.push_back(specials[name].at("ids").get<std::vector<int32_t>>());
      is_sequence_.push_back(false);
    } else {
      fail(VEGAS_ERR_FORMAT,
           "tokenizer.json: TemplateProcessing piece is neither "
           "Sequence nor SpecialToken");
    }
  }
}

std::vector<int32_t> PostProcessor::apply(const std::vector<int32_t> &ids) const {
  if (!has_template_) return ids;
  std::vector<int32_t> out;
  out.reserve(ids.size() + 4);
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const auto &src = is_sequence_[i] ? ids : pieces_[i];
    out.insert(out.end(), src.begin(), src.end());
  }
  return out;
}

}  // namespace vegas
