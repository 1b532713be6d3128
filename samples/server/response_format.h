// The JSON bodies and Server-Sent Events the endpoints answer with, in the
// shapes OpenAI (completions, chat) and llama.cpp (/infill) clients expect.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generation_job.h"
#include "http_api.h"

namespace vegas_server {

struct ResponseContext {
  HttpApi::Endpoint endpoint;
  std::string id;  // "cmpl-7", "chatcmpl-7"
  int64_t created = 0;
  std::string model;
  bool logprobs = false;            // the request asked for logprobs
  bool processed_logprobs = false;  // ... of the processed distribution (post_sampling_probs)
};

// "stop", "length", "cancelled" or "error".
const char *finish_reason_name(int32_t finish_reason);

// The whole answer of a non-streaming request; `logprobs`: every generated
// token's (ctx.logprobs).
nlohmann::json full_response(const ResponseContext &ctx, const std::string &text,
                             const GenerationResult &result,
                             const std::vector<TokenLogprobs> &logprobs = {});

// One streamed event carrying `text` and the logprobs of its tokens; `first`
// adds the chat role; `text_offset`: the bytes of token text streamed before
// (OpenAI completions' text_offset).
nlohmann::json stream_chunk(const ResponseContext &ctx, const std::string &text, bool first,
                            const std::vector<TokenLogprobs> &logprobs = {},
                            int64_t text_offset = 0);
// The bytes of the tokens' text, for the next chunk's text_offset.
int64_t token_text_bytes(const std::vector<TokenLogprobs> &logprobs);
// The last event: finish reason (and, for /infill, the counts).
nlohmann::json stream_final_chunk(const ResponseContext &ctx, const GenerationResult &result);
// OpenAI's stream_options.include_usage event: no choices, the usage counts.
nlohmann::json stream_usage_chunk(const ResponseContext &ctx, const GenerationResult &result);

// "data: <json>\n\n"; invalid UTF-8 never reaches the client (replaced by U+FFFD).
std::string sse_event(const nlohmann::json &j);
std::string dump_json(const nlohmann::json &j);

}  // namespace vegas_server
