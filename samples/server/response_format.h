// The JSON bodies and Server-Sent Events the endpoints answer with, in the
// shapes OpenAI (completions, chat) and llama.cpp (/infill) clients expect.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "generation_job.h"
#include "http_api.h"

namespace vegas_server {

struct ResponseContext {
  HttpApi::Endpoint endpoint;
  std::string id;  // "cmpl-7", "chatcmpl-7"
  int64_t created = 0;
  std::string model;
};

// "stop", "length", "cancelled" or "error".
const char *finish_reason_name(int32_t finish_reason);

// The whole answer of a non-streaming request.
nlohmann::json full_response(const ResponseContext &ctx, const std::string &text,
                             const GenerationResult &result);

// One streamed event carrying `text`; `first` adds the chat role.
nlohmann::json stream_chunk(const ResponseContext &ctx, const std::string &text, bool first);
// The last event: finish reason (and, for /infill, the counts).
nlohmann::json stream_final_chunk(const ResponseContext &ctx, const GenerationResult &result);
// OpenAI's stream_options.include_usage event: no choices, the usage counts.
nlohmann::json stream_usage_chunk(const ResponseContext &ctx, const GenerationResult &result);

// "data: <json>\n\n"; invalid UTF-8 never reaches the client (replaced by U+FFFD).
std::string sse_event(const nlohmann::json &j);
std::string dump_json(const nlohmann::json &j);

}  // namespace vegas_server
