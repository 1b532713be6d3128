// The tokenizer.json pre-tokenizer: Split (regex or literal, every HF split
// behaviour, invert), ByteLevel (GPT-2 regex, add_prefix_space, byte mapping)
// and Sequence of them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/split_regex.h"

namespace vegas {

class PreTokenizer {
 public:
  // `spec` is the JSON value of "pre_tokenizer" (may be null). Throws
  // UNSUPPORTED naming an unknown type or behaviour, FORMAT for malformed entries.
  explicit PreTokenizer(const nlohmann::json &spec);
  ~PreTokenizer();

  // Splits one piece of normalized text (valid UTF-8) into words, appended to
  // `words`; empty words are dropped as HF does.
  void split(std::string_view text, std::vector<std::string> &words) const;

 private:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Step {
    enum class Kind { kSplit, kByteLevel } kind = Kind::kSplit;
    std::unique_ptr<SplitRegex> regex;  // Split with a Regex pattern, or ByteLevel use_regex
    std::string literal;                // Split with a String pattern
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
  };

  void add_steps(const nlohmann::json &spec);
  static void apply_split(const Step &step, std::string_view text, std::vector<std::string> &out);

  std::vector<Step> steps_;
};

}  // namespace vegas
