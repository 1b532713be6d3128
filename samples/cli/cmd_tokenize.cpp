// `vegas tokenize` and `vegas detokenize`: text <-> token ids with the model's
// tokenizer, loaded alone (no weights).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "vegas.h"

namespace vegas_cli {

namespace {

// Prints "vegas: <STATUS>: <message>" and ends the command with a non-zero exit.
void check_status(vegas_status status) {
  if (status == VEGAS_OK) return;
  std::fprintf(stderr, "vegas: %s: %s\n", vegas_status_name(status), vegas_last_error());
  throw CLI::RuntimeError(1);
}

using TokenizerPtr = std::unique_ptr<vegas_tokenizer, decltype(&vegas_tokenizer_free)>;

TokenizerPtr load_tokenizer(const std::string &model_dir) {
  vegas_tokenizer *tok = nullptr;
  check_status(
      vegas_tokenizer_load(model_dir.empty() ? default_model_dir() : model_dir.c_str(), &tok));
  return TokenizerPtr(tok, &vegas_tokenizer_free);
}

struct TokenizeArgs {
  std::string model_dir, text, file;
  bool json = false, no_special = false;
};

void run_tokenize(const TokenizeArgs &a) {
  const std::string text = a.file.empty() ? a.text : read_input_file(a.file, "text file");
  TokenizerPtr tok = load_tokenizer(a.model_dir);
  vegas_tokenize_options opts;
  vegas_tokenize_options_init(&opts);
  opts.parse_special = a.no_special ? 0 : 1;
  size_t n = 0;
  std::vector<int32_t> ids(text.size() + 16);  // never more ids than bytes, plus specials
  vegas_status st =
      vegas_tokenize(tok.get(), text.data(), text.size(), &opts, ids.data(), ids.size(), &n);
  if (st == VEGAS_ERR_BUFFER_TOO_SMALL) {
    ids.resize(n);
    st = vegas_tokenize(tok.get(), text.data(), text.size(), &opts, ids.data(), ids.size(), &n);
  }
  check_status(st);
  ids.resize(n);
  if (a.json) {
    std::printf("%s\n", nlohmann::json{{"ids", ids}}.dump().c_str());
    return;
  }
  for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
  std::printf("\n");
}

struct DetokenizeArgs {
  std::string model_dir, ids;
  bool json = false;
};

// Ids separated by commas and/or white space ("1,2,3" or tokenize's "1 2 3").
std::vector<int32_t> parse_ids(const std::string &list) {
  std::vector<int32_t> ids;
  std::string spaced = list;
  for (char &c : spaced)
    if (c == ',' || c == '\n' || c == '\t' || c == '\r') c = ' ';
  std::stringstream ss(spaced);
  for (std::string item; ss >> item;) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception &) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < INT32_MIN || v > INT32_MAX) {
      std::fprintf(stderr, "vegas: VEGAS_ERR_INVALID_ARGUMENT: --ids: '%s' is not a token id\n",
                   item.c_str());
      throw CLI::RuntimeError(1);
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

// The text of `ids` (their bytes; a piece may hold part of a UTF-8 character).
std::string detokenize(vegas_tokenizer *tok, const std::vector<int32_t> &ids) {
  size_t n = 0;
  vegas_status st = vegas_detokenize(tok, ids.data(), ids.size(), 0, nullptr, 0, &n);
  std::string text(n, '\0');
  if (st == VEGAS_ERR_BUFFER_TOO_SMALL)
    st = vegas_detokenize(tok, ids.data(), ids.size(), 0, text.data(), text.size(), &n);
  check_status(st);
  text.resize(n);
  return text;
}

void run_detokenize(const DetokenizeArgs &a) {
  const std::vector<int32_t> ids =
      parse_ids(a.ids == "-" ? read_input_file("-", "token ids") : a.ids);
  TokenizerPtr tok = load_tokenizer(a.model_dir);
  const std::string text = detokenize(tok.get(), ids);
  if (!a.json) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::printf("\n");
    return;
  }
  // Each id's own piece too: where a text's token boundaries fall. A piece
  // that is not whole UTF-8 (part of a character) is shown with U+FFFD.
  nlohmann::json pieces = nlohmann::json::array();
  for (int32_t id : ids) pieces.push_back(detokenize(tok.get(), {id}));
  const auto replace = nlohmann::json::error_handler_t::replace;
  std::printf("%s\n", nlohmann::json{{"text", text}, {"ids", ids}, {"pieces", pieces}}
                          .dump(-1, ' ', false, replace)
                          .c_str());
}

}  // namespace

void add_tokenize_commands(CLI::App &app) {
  auto targs = std::make_shared<TokenizeArgs>();
  CLI::App *tok = app.add_subcommand("tokenize", "Print the token ids of a text");
  tok->add_option("--model", targs->model_dir,
                  "Model directory or GGUF file (default: the embedded model)");
  auto *text = tok->add_option("--text", targs->text, "Text to tokenize");
  auto *file = tok->add_option("--file", targs->file,
                               "File whose contents to tokenize (- for standard input)");
  text->excludes(file);
  tok->add_flag("--json", targs->json, "Print {\"ids\":[...]}");
  tok->add_flag("--no-special", targs->no_special, "Treat special-token text as plain text");
  tok->callback([targs, text, file] {
    if (text->count() == 0 && file->count() == 0) throw CLI::RequiredError("--text or --file");
    run_tokenize(*targs);
  });

  auto dargs = std::make_shared<DetokenizeArgs>();
  CLI::App *detok = app.add_subcommand("detokenize", "Print the text of token ids");
  detok->add_option("--model", dargs->model_dir,
                    "Model directory or GGUF file (default: the embedded model)");
  detok
      ->add_option("--ids", dargs->ids,
                   "Token ids, separated by commas or spaces; - reads them from standard input")
      ->required();
  detok->add_flag("--json", dargs->json, "Print {\"text\":...,\"ids\":[...],\"pieces\":[...]}");
  detok->callback([dargs] { run_detokenize(*dargs); });
}

}  // namespace vegas_cli
