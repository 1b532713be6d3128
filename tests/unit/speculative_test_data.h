// Test helper: where the embedded model and the public benchmark prompts are
// (env VEGAS_MODEL_DIR / VEGAS_SHARED_DIR, else the source tree's defaults),
// and the prompts of one size tokenized with the model's own tokenizer.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/model_dir.h"
#include "tokenizer/tokenizer.h"

namespace vegas::test {

inline std::string env_or(const char *name, const std::string &fallback) {
  if (const char *v = std::getenv(name); v != nullptr && *v != '\0') return v;
  return fallback;
}

inline std::string public_prompts_path() {
  return env_or("VEGAS_SHARED_DIR", std::string(VEGAS_SOURCE_DIR) + "/../shared") +
         "/bench/prompts-public.jsonl";
}

inline bool have_model_and_prompts() {
  return std::filesystem::is_regular_file(embedded_model_dir() + "/config.json") &&
         std::filesystem::is_regular_file(public_prompts_path());
}

struct TokenizedPrompt {
  std::string id;
  std::vector<int32_t> ids;
};

// The prompts whose id ends in `suffix` ("-2k", "-8k", "-16k"), in file order.
// `<|endoftext|>` separators are special tokens (parse_special).
inline std::vector<TokenizedPrompt> load_public_prompts(const Tokenizer &tokenizer,
                                                        const std::string &suffix) {
  std::ifstream in(public_prompts_path());
  if (!in) throw std::runtime_error("cannot read " + public_prompts_path());
  std::vector<TokenizedPrompt> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    const std::string id = j.at("id").get<std::string>();
    if (id.size() < suffix.size() || id.compare(id.size() - suffix.size(), suffix.size(), suffix))
      continue;
    out.push_back({id, tokenizer.encode(j.at("text").get<std::string>(), true, true)});
  }
  return out;
}

}  // namespace vegas::test
