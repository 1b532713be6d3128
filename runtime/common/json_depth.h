// JSON read from files (config.json, tokenizer.json and its config,
// safetensors headers and indexes, tuning profiles) is checked for nesting
// before it is parsed: nlohmann's parser is iterative, but copying or walking
// a parsed value recurses once a level, and 100,000 nested Sequences in a
// tokenizer.json overflowed the loading thread's stack. No file the library
// reads nests more than a handful of levels.
#pragma once

#include <string>

#include "common/error.h"

namespace vegas {

constexpr int kMaxJsonDepth = 64;

// Throws FORMAT naming `what` when brackets outside strings nest deeper than
// kMaxJsonDepth in [begin, end). Anything else malformed is the parser's to find.
inline void check_json_depth(const char *begin, const char *end, const std::string &what) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char *p = begin; p != end; ++p) {
    const char c = *p;
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth)
        fail(VEGAS_ERR_FORMAT,
             what + ": JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
}

inline void check_json_depth(const std::string &text, const std::string &what) {
  check_json_depth(text.data(), text.data() + text.size(), what);
}

}  // namespace vegas
