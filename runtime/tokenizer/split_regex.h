// A pre-tokenizer regex: Hugging Face patterns (Oniguruma/Ruby syntax) compiled
// with PCRE2 (UTF + UCP, JIT when available).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vegas {

class SplitRegex {
 public:
  // Throws FORMAT (naming `where`) when the pattern does not compile.
  SplitRegex(const std::string &oniguruma_pattern, const std::string &where);
  ~SplitRegex();
  SplitRegex(const SplitRegex &) = delete;
  SplitRegex &operator=(const SplitRegex &) = delete;

  // Non-overlapping matches [start, end) over valid UTF-8 `text`, iterated the
  // way the `onig` crate does (an empty match right after the previous match is
  // skipped by one character). Thread-safe.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

  // Does the whole of `text` match? Thread-safe.
  bool full_match(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Rewrites the few Oniguruma (Ruby syntax) constructs that PCRE2 reads
// differently: \h / \H (hex digit in Ruby) and the (?m) flag (dot-all in Ruby).
std::string oniguruma_to_pcre2(const std::string &pattern);

}  // namespace vegas
