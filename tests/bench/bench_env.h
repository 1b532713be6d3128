// The CUDA benchmarks' comma-separated integer lists from the environment
// (VEGAS_STREAM_GROUPS, VEGAS_BENCH_WEIGHT_BATCHES).
#pragma once

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace vegas::bench {

// The integers of environment variable `name` ("1,4,8"), or `fallback` when unset.
inline std::vector<int> ints_from_env(const char *name, std::vector<int> fallback) {
  const char *env = std::getenv(name);
  if (env == nullptr) return fallback;
  std::vector<int> out;
  std::istringstream list(env);
  for (std::string item; std::getline(list, item, ',');)
    if (!item.empty()) out.push_back(std::atoi(item.c_str()));
  return out;
}

}  // namespace vegas::bench
