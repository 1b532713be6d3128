#include "session/stop_filter.h"

#include <algorithm>

#include <utf8proc.h>

#include "common/error.h"

namespace vegas {

namespace {

bool is_valid_utf8(const std::string &s) {
  const auto *p = reinterpret_cast<const utf8proc_uint8_t *>(s.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(s.size());
  while (left > 0) {
    utf8proc_int32_t cp;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) return false;
    p += n;
    left -= n;
  }
  return true;
}

std::vector<uint32_t> kmp_borders(const std::string &s) {
  std::vector<uint32_t> border(s.size(), 0);
  uint32_t k = 0;
  for (size_t i = 1; i < s.size(); ++i) {
    while (k > 0 && s[i] != s[k]) k = border[k - 1];
    if (s[i] == s[k]) ++k;
    border[i] = k;
  }
  return border;
}

}  // namespace

StopFilter::StopFilter(const std::vector<std::string> &stop_strings) {
  patterns_.reserve(stop_strings.size());
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    const std::string &s = stop_strings[i];
    if (s.empty())
      fail(VEGAS_ERR_INVALID_ARGUMENT, "stop string " + std::to_string(i) + " is empty");
    if (!is_valid_utf8(s))
      fail(VEGAS_ERR_INVALID_ARGUMENT, "stop string " + std::to_string(i) + " is not valid UTF-8");
    patterns_.push_back(Pattern{s, kmp_borders(s), 0});
  }
}

StopFilter::Result StopFilter::push(std::string_view piece) {
  Result result;
  if (stopped_) {
    result.stopped = true;
    return result;
  }
  // Every pattern's state is at most held_.size(), so a match found in this
  // piece starts inside held_ + piece.
  std::string pending = held_;
  pending.append(piece);
  for (size_t b = held_.size(); b < pending.size(); ++b) {
    const char c = pending[b];
    size_t matched = 0;
    for (Pattern &p : patterns_) {
      while (p.state > 0 && p.text[p.state] != c) p.state = p.border[p.state - 1];
      if (p.text[p.state] == c) ++p.state;
      if (p.state == p.text.size()) matched = std::max(matched, p.state);
    }
    if (matched > 0) {
      stopped_ = true;
      held_.clear();
      result.emit = pending.substr(0, b + 1 - matched);
      result.stopped = true;
      return result;
    }
  }
  size_t hold = 0;
  for (const Pattern &p : patterns_) hold = std::max(hold, p.state);
  result.emit = pending.substr(0, pending.size() - hold);
  held_ = pending.substr(pending.size() - hold);
  return result;
}

std::string StopFilter::finish() {
  std::string rest;
  rest.swap(held_);
  for (Pattern &p : patterns_) p.state = 0;
  return rest;
}

}  // namespace vegas
