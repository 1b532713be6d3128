// Whether a string ends with a suffix (C++17 has no std::string::ends_with).
#pragma once

#include <string>

namespace vegas {

inline bool ends_with(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace vegas
