// Test helper: a minimal byte-level BPE tokenizer.json whose n tokens are the
// letters a, b, c, ... (ids 0 .. n - 1), for tiny random models.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace vegas::test {

inline std::string letters_tokenizer_json(int32_t n) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int32_t i = 0; i < n; ++i) vocab[std::string(1, static_cast<char>('a' + i))] = i;
  nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  return j.dump();
}

}  // namespace vegas::test
