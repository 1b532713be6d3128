// Tokenizer::load / from_json: reads the files and turns JSON errors into
// FORMAT errors that say which file is wrong.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/json_depth.h"
#include "common/small_file.h"
#include "tokenizer/bpe_tokenizer.h"

namespace vegas {

namespace {

// Real tokenizer files: up to tens of MB (151K-token vocabularies and merges).
std::string read_file(const std::filesystem::path &path) {
  return read_small_file(path.string(), size_t{512} << 20, path.filename().string());
}

nlohmann::json parse(const std::string &text, const char *name) {
  check_json_depth(text, name);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception &e) {
    fail(VEGAS_ERR_FORMAT, std::string(name) + " is not valid JSON: " + e.what());
  }
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_json(const std::string &tokenizer_json,
                                                const std::string &config_json) {
  const nlohmann::json tokenizer = parse(tokenizer_json, "tokenizer.json");
  if (!tokenizer.is_object()) fail(VEGAS_ERR_FORMAT, "tokenizer.json is not a JSON object");
  const nlohmann::json config =
      config_json.empty() ? nlohmann::json() : parse(config_json, "tokenizer_config.json");
  try {
    return std::make_unique<BpeTokenizer>(tokenizer, config);
  } catch (const nlohmann::json::exception &e) {
    // A field of the wrong JSON type somewhere the parser did not check by hand.
    fail(VEGAS_ERR_FORMAT, std::string("tokenizer.json: unexpected content: ") + e.what());
  }
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string &path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file = path;
  if (fs::is_directory(file, ec)) file /= "tokenizer.json";
  if (!fs::exists(file, ec)) fail(VEGAS_ERR_IO, "no tokenizer file at " + file.string());
  const fs::path config = file.parent_path() / "tokenizer_config.json";
  const std::string config_text = fs::exists(config, ec) ? read_file(config) : std::string();
  return from_json(read_file(file), config_text);
}

}  // namespace vegas
