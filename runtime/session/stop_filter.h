// Streaming stop strings for one sequence. Text arrives in complete UTF-8
// pieces; the filter emits only text that can no longer be the start of a stop
// string, holds back the rest, and reports a match.
//
// Which match wins: the first stop string to be completed while reading the
// text in order (the earliest end), and among those ending on the same byte the
// longest. This makes the output independent of how the text is cut into
// pieces (a longer stop string that starts earlier but ends later would never
// be seen by plain decoding, which stops at the first completed match).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vegas {

class StopFilter {
 public:
  struct Result {
    std::string emit;      // text now safe to show
    bool stopped = false;  // a stop string matched; it and all later text are dropped
  };

  // Throws INVALID_ARGUMENT for an empty stop string or one that is not valid
  // UTF-8. An empty list makes the filter a pass-through.
  explicit StopFilter(const std::vector<std::string> &stop_strings);

  // Feeds the next piece. After a stop, returns {"", true} for every piece.
  Result push(std::string_view piece);

  // Ends the stream: releases the held-back text (empty after a stop).
  std::string finish();

  bool stopped() const { return stopped_; }
  // Bytes currently held back (a possible start of a stop string).
  size_t held() const { return held_.size(); }

 private:
  // A stop string with its Knuth-Morris-Pratt table and the length of its
  // longest prefix that is a suffix of the text read so far.
  struct Pattern {
    std::string text;
    std::vector<uint32_t> border;  // border[i]: longest proper border of text[0..i]
    size_t state = 0;
  };

  std::vector<Pattern> patterns_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace vegas
