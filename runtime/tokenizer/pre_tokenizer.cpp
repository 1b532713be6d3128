#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/error.h"
#include "tokenizer/byte_level.h"

namespace vegas {

namespace {

// GPT-2's pattern, used by ByteLevel when use_regex is true.
constexpr const char *kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

bool get_bool(const nlohmann::json &spec, const char *key, bool fallback) {
  if (!spec.contains(key) || spec[key].is_null()) return fallback;
  if (!spec[key].is_boolean())
    fail(VEGAS_ERR_FORMAT,
         std::string("tokenizer.json: pre_tokenizer field \"") + key + "\" is not a boolean");
  return spec[key].get<bool>();
}

// One span of the text: [start, end) and whether the pattern matched it.
struct Span {
  size_t start, end;
  bool is_match;
};

}  // namespace

PreTokenizer::PreTokenizer(const nlohmann::json &spec) {
  add_steps(spec);
}
PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::add_steps(const nlohmann::json &spec) {
  if (spec.is_null()) return;
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string())
    fail(VEGAS_ERR_FORMAT, "tokenizer.json: pre_tokenizer has no \"type\"");
  const std::string type = spec["type"].get<std::string>();
  if (type == "Sequence") {
    if (!spec.contains("pretokenizers") || !spec["pretokenizers"].is_array())
      fail(VEGAS_ERR_FORMAT, "tokenizer.json: pre_tokenizer Sequence has no \"pretokenizers\"");
    for (const auto &sub : spec["pretokenizers"]) add_steps(sub);
    return;
  }
  Step step;
  if (type == "ByteLevel") {
    step.kind = Step::Kind::kByteLevel;
    step.add_prefix_space = get_bool(spec, "add_prefix_space", true);
    if (get_bool(spec, "use_regex", true))
      step.regex = std::make_unique<SplitRegex>(kGpt2Pattern, "ByteLevel GPT-2 pattern");
  } else if (type == "Split") {
    if (!spec.contains("pattern") || !spec["pattern"].is_object())
      fail(VEGAS_ERR_FORMAT, "tokenizer.json: Split pre_tokenizer has no \"pattern\" object");
    const auto &pattern = spec["pattern"];
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      step.regex = std::make_unique<SplitRegex>(pattern["Regex"].get<std::string>(),
                                                "tokenizer.json: Split pattern");
    } else if (pattern.contains("String") && pattern["String"].is_string()) {
      step.literal = pattern["String"].get<std::string>();
    } else {
      fail(VEGAS_ERR_FORMAT, "tokenizer.json: Split pattern needs a \"Regex\" or \"String\"");
    }
    if (!spec.contains("behavior") || !spec["behavior"].is_string())
      fail(VEGAS_ERR_FORMAT, "tokenizer.json: Split pre_tokenizer has no \"behavior\"");
    const std::string behavior = spec["behavior"].get<std::string>();
    if (behavior == "Removed")
      step.behavior = Behavior::kRemoved;
    else if (behavior == "Isolated")
      step.behavior = Behavior::kIsolated;
    else if (behavior == "MergedWithPrevious")
      step.behavior = Behavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext")
      step.behavior = Behavior::kMergedWithNext;
    else if (behavior == "Contiguous")
      step.behavior = Behavior::kContiguous;
    else
      fail(VEGAS_ERR_UNSUPPORTED,
           "tokenizer.json: Split behavior \"" + behavior + "\" is not supported");
    step.invert = get_bool(spec, "invert", false);
  } else {
    fail(VEGAS_ERR_UNSUPPORTED,
         "tokenizer.json: pre_tokenizer type \"" + type + "\" is not supported");
  }
  steps_.push_back(std::move(step));
}

// Follows tokenizers' NormalizedString::split: the pattern's matches and the
// gaps between them, then the behaviour decides what is kept and merged.
void PreTokenizer::apply_split(const Step &step, std::string_view text,
                               std::vector<std::string> &out) {
  std::vector<Span> spans;
  if (text.empty()) return;
  size_t prev = 0;
  auto add_match = [&](size_t s, size_t e) {
    if (prev != s) spans.push_back({prev, s, false});
    spans.push_back({s, e, true});
    prev = e;
  };
  if (step.regex) {
    for (const auto &m : step.regex->find_all(text)) add_match(m.first, m.second);
  } else if (!step.literal.empty()) {
    for (size_t pos = text.find(step.literal); pos != std::string_view::npos;
         pos = text.find(step.literal, prev))
      add_match(pos, pos + step.literal.size());
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), false});
  if (step.invert)
    for (auto &s : spans) s.is_match = !s.is_match;

  // After this, `is_match` means "remove this span".
  std::vector<Span> kept;
  bool previous_match = false;
  switch (step.behavior) {
    case Behavior::kRemoved:
      kept.swap(spans);
      break;
    case Behavior::kIsolated:
      kept.swap(spans);
      for (auto &s : kept) s.is_match = false;
      break;
    case Behavior::kMergedWithPrevious:
      for (const auto &s : spans) {
        if (s.is_match && !previous_match && !kept.empty())
          kept.back().end = s.end;
        else
          kept.push_back({s.start, s.end, false});
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !kept.empty())
          kept.back().start = it->start;
        else
          kept.push_back({it->start, it->end, false});
        previous_match = it->is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    case Behavior::kContiguous:
      for (const auto &s : spans) {
        if (s.is_match == previous_match && !kept.empty())
          kept.back().end = s.end;
        else
          kept.push_back({s.start, s.end, false});
        previous_match = s.is_match;
      }
      break;
  }
  for (const auto &s : kept)
    if (!s.is_match && s.end > s.start) out.emplace_back(text.substr(s.start, s.end - s.start));
}

void PreTokenizer::split(std::string_view text, std::vector<std::string> &words) const {
  std::vector<std::string> current{std::string(text)};
  std::vector<std::string> next;
  for (const Step &step : steps_) {
    next.clear();
    for (const std::string &piece : current) {
      if (step.kind == Step::Kind::kSplit) {
        apply_split(step, piece, next);
        continue;
      }
      // ByteLevel: optional prefix space, optional GPT-2 split, then the byte mapping.
      std::string spaced;
      std::string_view view = piece;
      if (step.add_prefix_space && (piece.empty() || piece[0] != ' ')) {
        spaced = " " + piece;
        view = spaced;
      }
      std::vector<std::string> parts;
      if (step.regex) {
        apply_split(step, view, parts);
      } else if (!view.empty()) {
        parts.emplace_back(view);
      }
      for (const std::string &part : parts) {
        std::string mapped;
        mapped.reserve(part.size() * 2);
        byte_level::encode(part, mapped);
        next.push_back(std::move(mapped));
      }
    }
    current.swap(next);
  }
  for (auto &w : current)
    if (!w.empty()) words.push_back(std::move(w));
}

}  // namespace vegas
