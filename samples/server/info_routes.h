// llama-server's tokenizer and information endpoints, which IDE plugins call
// besides completions: POST /tokenize ({"content", "add_special",
// "parse_special", "with_pieces"} -> {"tokens"}), POST /detokenize
// ({"tokens"} -> {"content"}) and GET /props (slots, context, model, chat
// template, limits).
#pragma once

#include <string>

#include <httplib.h>

#include "prompt_format.h"
#include "request_parser.h"
#include "server_options.h"

namespace vegas_server {

class InfoRoutes {
 public:
  InfoRoutes(const ServerOptions &options, std::string model_name, const PromptFormat *format,
             RequestLimits limits)
      : options_(options), model_name_(std::move(model_name)), format_(format), limits_(limits) {}

  void install(httplib::Server *server);

 private:
  void tokenize(const httplib::ContentReader &reader, httplib::Response &res) const;
  void detokenize(const httplib::ContentReader &reader, httplib::Response &res) const;
  nlohmann::json props() const;

  const ServerOptions &options_;
  const std::string model_name_;
  const PromptFormat *format_;
  const RequestLimits limits_;
};

}  // namespace vegas_server
