#include "response_format.h"

#include <cmath>

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

json piece_bytes(const std::string &piece) {
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return bytes;
}

// OpenAI chat: {"content": [{token, logprob, bytes, top_logprobs}]}.
json chat_logprobs(const std::vector<TokenLogprobs> &lps) {
  json content = json::array();
  for (const TokenLogprobs &lp : lps) {
    json top = json::array();
    for (const TokenProb &t : lp.top)
      top.push_back({{"token", t.piece}, {"logprob", t.logprob}, {"bytes", piece_bytes(t.piece)}});
    content.push_back({{"token", lp.chosen.piece},
                       {"logprob", lp.chosen.logprob},
                       {"bytes", piece_bytes(lp.chosen.piece)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

// OpenAI completions: parallel arrays, alternatives as {text: logprob}.
json completion_logprobs(const std::vector<TokenLogprobs> &lps, int64_t offset) {
  json tokens = json::array(), values = json::array(), tops = json::array(),
       offsets = json::array();
  for (const TokenLogprobs &lp : lps) {
    tokens.push_back(lp.chosen.piece);
    values.push_back(lp.chosen.logprob);
    json top = json::object();
    for (const TokenProb &t : lp.top)
      if (!top.contains(t.piece)) top[t.piece] = t.logprob;  // two ids, one text: the likelier
    tops.push_back(top);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(lp.chosen.piece.size());
  }
  return {{"tokens", tokens},
          {"token_logprobs", values},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

// llama.cpp (/infill, n_probs): [{id, token, logprob, bytes, top_logprobs}],
// or with post_sampling_probs [{id, token, prob, bytes, top_probs}].
json llama_probabilities(const std::vector<TokenLogprobs> &lps, bool processed) {
  auto one = [processed](const TokenProb &t) {
    json j = {{"id", t.id}, {"token", t.piece}, {"bytes", piece_bytes(t.piece)}};
    if (processed)
      j["prob"] = std::exp(t.logprob);
    else
      j["logprob"] = t.logprob;
    return j;
  };
  json out = json::array();
  for (const TokenLogprobs &lp : lps) {
    json e = one(lp.chosen);
    json top = json::array();
    for (const TokenProb &t : lp.top) top.push_back(one(t));
    e[processed ? "top_probs" : "top_logprobs"] = top;
    out.push_back(e);
  }
  return out;
}

// The "logprobs" value of an OpenAI choice: null unless asked for.
json choice_logprobs(const ResponseContext &ctx, const std::vector<TokenLogprobs> &lps,
                     int64_t offset) {
  if (!ctx.logprobs) return nullptr;
  return ctx.endpoint == HttpApi::Endpoint::kChat ? chat_logprobs(lps)
                                                  : completion_logprobs(lps, offset);
}

}  // namespace

int64_t token_text_bytes(const std::vector<TokenLogprobs> &logprobs) {
  int64_t n = 0;
  for (const TokenLogprobs &lp : logprobs) n += static_cast<int64_t>(lp.chosen.piece.size());
  return n;
}

json full_response(const ResponseContext &ctx, const std::string &text,
                   const GenerationResult &result, const std::vector<TokenLogprobs> &logprobs) {
  const char *reason = finish_reason_name(result.finish_reason);
  switch (ctx.endpoint) {
    case HttpApi::Endpoint::kCompletion: {
      json j = envelope(ctx, "text_completion");
      j["choices"] = json::array({{{"text", text},
                                   {"index", 0},
                                   {"logprobs", choice_logprobs(ctx, logprobs, 0)},
                                   {"finish_reason", reason}}});
      j["usage"] = usage(result);
      return j;
    }
    case HttpApi::Endpoint::kChat: {
      json j = envelope(ctx, "chat.completion");
      j["choices"] = json::array({{{"index", 0},
                                   {"message", {{"role", "assistant"}, {"content", text}}},
                                   {"logprobs", choice_logprobs(ctx, logprobs, 0)},
                                   {"finish_reason", reason}}});
      j["usage"] = usage(result);
      return j;
    }
    case HttpApi::Endpoint::kInfill:
      break;
  }
  json j = {{"content", text},
            {"stop", true},
            {"stop_type", reason},
            {"model", ctx.model},
            {"tokens_predicted", result.n_generated},
            {"tokens_evaluated", result.n_prompt}};
  if (ctx.logprobs)
    j["completion_probabilities"] = llama_probabilities(logprobs, ctx.processed_logprobs);
  return j;
}

json stream_chunk(const ResponseContext &ctx, const std::string &text, bool first,
                  const std::vector<TokenLogprobs> &logprobs, int64_t text_offset) {
  switch (ctx.endpoint) {
    case HttpApi::Endpoint::kCompletion: {
      json j = envelope(ctx, "text_completion");
      j["choices"] = json::array({{{"text", text},
                                   {"index", 0},
                                   {"logprobs", choice_logprobs(ctx, logprobs, text_offset)},
                                   {"finish_reason", nullptr}}});
      return j;
    }
    case HttpApi::Endpoint::kChat: {
      json j = envelope(ctx, "chat.completion.chunk");
      json delta = {{"content", text}};
      if (first) delta["role"] = "assistant";
      j["choices"] = json::array({{{"index", 0},
                                   {"delta", delta},
                                   {"logprobs", choice_logprobs(ctx, logprobs, text_offset)},
                                   {"finish_reason", nullptr}}});
      return j;
    }
    case HttpApi::Endpoint::kInfill:
      break;
  }
  json j = {{"content", text}, {"stop", false}};
  if (ctx.logprobs)
    j["completion_probabilities"] = llama_probabilities(logprobs, ctx.processed_logprobs);
  return j;
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
