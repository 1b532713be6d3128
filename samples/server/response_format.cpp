#include "response_format.h"

namespace vegas_server {

using nlohmann::json;

const char *finish_reason_name(int32_t finish_reason) {
  switch (finish_reason) {
    case VEGAS_FINISH_EOS:
    case VEGAS_FINISH_STOP:
      return "stop";
    case VEGAS_FINISH_LENGTH:
      return "length";
    case VEGAS_FINISH_CANCELLED:
    case VEGAS_FINISH_CALLBACK:
      return "cancelled";
    default:
      return "error";
  }
}

namespace {

json usage(const GenerationResult &r) {
  return {{"prompt_tokens", r.n_prompt},
          {"completion_tokens", r.n_generated},
          {"total_tokens", r.n_prompt + r.n_generated}};
}

json envelope(const ResponseContext &ctx, const char *object) {
  return {{"id", ctx.id}, {"object", object}, {"created", ctx.created}, {"model", ctx.model}};
}

}  // namespace

json full_response(const ResponseContext &ctx, const std::string &text,
                   const GenerationResult &result) {
  const char *reason = finish_reason_name(result.finish_reason);
  switch (ctx.endpoint) {
    case HttpApi::Endpoint::kCompletion: {
      json j = envelope(ctx, "text_completion");
      j["choices"] = json::array(
          {{{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", reason}}});
      j["usage"] = usage(result);
      return j;
    }
    case HttpApi::Endpoint::kChat: {
      json j = envelope(ctx, "chat.completion");
      j["choices"] = json::array({{{"index", 0},
                                   {"message", {{"role", "assistant"}, {"content", text}}},
                                   {"logprobs", nullptr},
                                   {"finish_reason", reason}}});
      j["usage"] = usage(result);
      return j;
    }
    case HttpApi::Endpoint::kInfill:
      break;
  }
  return {{"content", text},
          {"stop", true},
          {"stop_type", reason},
          {"model", ctx.model},
          {"tokens_predicted", result.n_generated},
          {"tokens_evaluated", result.n_prompt}};
}

json stream_chunk(const ResponseContext &ctx, const std::string &text, bool first) {
  switch (ctx.endpoint) {
    case HttpApi::Endpoint::kCompletion: {
      json j = envelope(ctx, "text_completion");
      j["choices"] = json::array(
          {{{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
      return j;
    }
    case HttpApi::Endpoint::kChat: {
      json j = envelope(ctx, "chat.completion.chunk");
      json delta = {{"content", text}};
      if (first) delta["role"] = "assistant";
      j["choices"] = json::array(
          {{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
      return j;
    }
    case HttpApi::Endpoint::kInfill:
      break;
  }
  return {{"content", text}, {"stop", false}};
}

json stream_final_chunk(const ResponseContext &ctx, const GenerationResult &result) {
  const char *reason = finish_reason_name(result.finish_reason);
  switch (ctx.endpoint) {
    case HttpApi::Endpoint::kCompletion: {
      json j = envelope(ctx, "text_completion");
      j["choices"] = json::array(
          {{{"text", ""}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", reason}}});
      return j;
    }
    case HttpApi::Endpoint::kChat: {
      json j = envelope(ctx, "chat.completion.chunk");
      j["choices"] = json::array({{{"index", 0},
                                   {"delta", json::object()},
                                   {"logprobs", nullptr},
                                   {"finish_reason", reason}}});
      return j;
    }
    case HttpApi::Endpoint::kInfill:
      break;
  }
  json j = full_response(ctx, "", result);
  return j;
}

json stream_usage_chunk(const ResponseContext &ctx, const GenerationResult &result) {
  json j = envelope(
      ctx, ctx.endpoint == HttpApi::Endpoint::kChat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage(result);
  return j;
}

std::string dump_json(const json &j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json &j) {
  return "data: " + dump_json(j) + "\n\n";
}

}  // namespace vegas_server
