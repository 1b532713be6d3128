// Reads the JSON body of /v1/completions, /v1/chat/completions and /infill into
// a validated, tokenized GenerationParams. Every bad field raises ApiError 400
// whose message starts with the field's name.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "generation_job.h"
#include "prompt_format.h"

namespace vegas_server {

struct RequestLimits {
  int32_t max_prompt_tokens = 2048;
  int32_t max_output_tokens = 512;
  int32_t vocab_size = 0;
  // Prompt text longer than this (bytes, all text fields together) cannot fit
  // max_prompt_tokens and is refused before tokenizing: 0 = no such check.
  // max_prompt_text_bytes() gives the bound.
  uint64_t max_prompt_bytes = 0;
};

// The most bytes of text that can tokenize into max_tokens tokens: each token
// stands for at most max_piece_bytes bytes of normalized text, and NFC
// normalization shrinks text at most threefold (a Hangul L V T jamo triple,
// 9 bytes, composes into one 3-byte syllable).
uint64_t max_prompt_text_bytes(int32_t max_tokens, size_t max_piece_bytes);

struct ParsedRequest {
  GenerationParams gen;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

class RequestParser {
 public:
  RequestParser(const PromptFormat *format, RequestLimits limits)
      : format_(format), limits_(limits) {}

  // The body as a JSON object, or ApiError 400.
  static nlohmann::json parse_body(const std::string &body);

  ParsedRequest completion(const nlohmann::json &body) const;
  ParsedRequest chat(const nlohmann::json &body) const;
  ParsedRequest infill(const nlohmann::json &body) const;

 private:
  // Sampling, max_tokens, stop, stream: the fields every endpoint shares. Defaults
  // follow OpenAI (temperature 1) except where the caller passes its own.
  ParsedRequest common(const nlohmann::json &body, int32_t default_max_tokens,
                       double default_temperature) const;
  int32_t output_limit(const nlohmann::json &body, int32_t default_max_tokens) const;
  static void refuse_unsupported(const nlohmann::json &body);
  // logprobs, top_logprobs, n_probs into g.
  static void read_logprobs(const nlohmann::json &body, GenerationParams *g);
  void check_prompt_length(const std::vector<int32_t> &prompt, const char *field) const;
  // Refuses `bytes` of prompt text that cannot fit the token limit, before tokenizing.
  void check_prompt_bytes(uint64_t bytes, const char *field) const;

  const PromptFormat *format_;
  RequestLimits limits_;
};

}  // namespace vegas_server
