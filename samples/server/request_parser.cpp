#include "request_parser.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "api_error.h"

namespace vegas_server {

using nlohmann::json;

namespace {

// Present and not null: a field explicitly set to null means "default", as in OpenAI's API.
const json *field(const json &body, const char *name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

double number_in(const json &body, const char *name, double def, double lo, double hi) {
  const json *v = field(body, name);
  if (!v) return def;
  if (!v->is_number()) throw ApiError::bad_field(name, std::string(name) + " must be a number");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw ApiError::bad_field(name, std::string(name) + " must be in [" + json(lo).dump() + ", " +
                                        json(hi).dump() + "], got " + v->dump());
  return x;
}

int64_t integer_in(const json &body, const char *name, int64_t def, int64_t lo, int64_t hi) {
  const json *v = field(body, name);
  if (!v) return def;
  if (!v->is_number_integer())
    throw ApiError::bad_field(name, std::string(name) + " must be an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
    throw ApiError::bad_field(name, std::string(name) + " must be in [" + std::to_string(lo) +
                                        ", " + std::to_string(hi) + "], got " + v->dump());
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    throw ApiError::bad_field(name, std::string(name) + " must be in [" + std::to_string(lo) +
                                        ", " + std::to_string(hi) + "], got " + v->dump());
  return x;
}

bool boolean(const json &body, const char *name, bool def) {
  const json *v = field(body, name);
  if (!v) return def;
  if (!v->is_boolean()) throw ApiError::bad_field(name, std::string(name) + " must be a boolean");
  return v->get<bool>();
}

std::string string_field(const json &body, const char *name, bool required) {
  const json *v = field(body, name);
  if (!v) {
    if (required) throw ApiError::bad_field(name, std::string(name) + " is required");
    return std::string();
  }
  if (!v->is_string()) throw ApiError::bad_field(name, std::string(name) + " must be a string");
  return v->get<std::string>();
}

std::vector<std::string> stop_strings(const json &body) {
  const json *v = field(body, "stop");
  std::vector<std::string> out;
  if (!v) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > 16) throw ApiError::bad_field("stop", "stop holds more than 16 strings");
    for (const json &s : *v) {
      if (!s.is_string()) throw ApiError::bad_field("stop", "stop must hold only strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    throw ApiError::bad_field("stop", "stop must be a string or an array of strings");
  }
  for (const std::string &s : out)
    if (s.empty() || s.size() > 256 || s.find('\0') != std::string::npos)
      throw ApiError::bad_field("stop", "stop strings must have 1 to 256 bytes, none of them NUL");
  return out;
}

// Content of a chat message: a string, or an array of {"type":"text","text":...} parts.
std::string message_content(const json &content, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  if (content.is_string()) return content.get<std::string>();
  if (content.is_array()) {
    std::string text;
    for (const json &part : content) {
      // "type" checked as a string first: json::value threw on a number or
      // null there, which became a 500 (issue P1, hostile clients).
      const auto type = part.is_object() ? part.find("type") : part.end();
      if (!part.is_object() || type == part.end() || !type->is_string() || *type != "text" ||
          !part.contains("text") || !part["text"].is_string())
        throw ApiError::bad_field(where,
                                  where + " parts must be {\"type\": \"text\", \"text\": ...}");
      text += part["text"].get<std::string>();
    }
    return text;
  }
  throw ApiError::bad_field(where, where + " must be a string or an array of text parts");
}

}  // namespace

json RequestParser::parse_body(const std::string &body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ApiError(400, "", "the request body is not valid JSON");
  if (!j.is_object()) throw ApiError(400, "", "the request body must be a JSON object");
  return j;
}

void RequestParser::check_prompt_length(const std::vector<int32_t> &prompt,
                                        const char *field_name) const {
  if (prompt.empty())
    throw ApiError::bad_field(field_name, std::string(field_name) + " gives an empty prompt");
  if (static_cast<int64_t>(prompt.size()) > limits_.max_prompt_tokens)
    throw ApiError::bad_field(field_name, std::string(field_name) + ": the prompt has " +
                                              std::to_string(prompt.size()) +
                                              " tokens, more than the limit of " +
                                              std::to_string(limits_.max_prompt_tokens));
}

uint64_t max_prompt_text_bytes(int32_t max_tokens, size_t max_piece_bytes) {
  return 3 * static_cast<uint64_t>(std::max<int32_t>(max_tokens, 0)) *
         static_cast<uint64_t>(std::max<size_t>(max_piece_bytes, 1));
}

void RequestParser::check_prompt_bytes(uint64_t bytes, const char *field_name) const {
  if (limits_.max_prompt_bytes == 0 || bytes <= limits_.max_prompt_bytes) return;
  throw ApiError::bad_field(
      field_name, std::string(field_name) + ": the prompt text has " + std::to_string(bytes) +
                      " bytes, more than the limit of " +
                      std::to_string(limits_.max_prompt_tokens) + " tokens can hold");
}

ParsedRequest RequestParser::common(const json &body, int32_t default_max_tokens,
                                    double default_temperature) const {
  ParsedRequest r;
  GenerationParams &g = r.gen;
  vegas_sampling_options_init(&g.sampling);
  g.sampling.temperature =
      static_cast<float>(number_in(body, "temperature", default_temperature, 0.0, 2.0));
  g.sampling.top_p = static_cast<float>(number_in(body, "top_p", 1.0, 0.0, 1.0));
  if (g.sampling.top_p <= 0.0f) throw ApiError::bad_field("top_p", "top_p must be in (0, 1]");
  g.sampling.top_k =
      static_cast<int32_t>(integer_in(body, "top_k", 0, 0, std::max(limits_.vocab_size, 1)));
  g.sampling.min_p = static_cast<float>(number_in(body, "min_p", 0.0, 0.0, 1.0));
  g.sampling.presence_penalty =
      static_cast<float>(number_in(body, "presence_penalty", 0.0, -2.0, 2.0));
  g.sampling.frequency_penalty =
      static_cast<float>(number_in(body, "frequency_penalty", 0.0, -2.0, 2.0));
  g.sampling.repetition_penalty =
      static_cast<float>(number_in(body, "repetition_penalty", 1.0, 0.01, 10.0));
  if (field(body, "seed")) {
    g.sampling.seed = static_cast<uint64_t>(integer_in(
        body, "seed", 0, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  } else {
    g.sampling.seed = std::random_device{}();  // no seed: a different sample each time
  }

  g.max_tokens = output_limit(body, default_max_tokens);
  g.ignore_eos = boolean(body, "ignore_eos", false) ? 1 : 0;
  g.stop_strings = stop_strings(body);

  r.stream = boolean(body, "stream", false);
  if (const json *so = field(body, "stream_options")) {
    if (!so->is_object())
      throw ApiError::bad_field("stream_options", "stream_options must be an object");
    r.include_usage = boolean(*so, "include_usage", false);
  }
  if (integer_in(body, "n", 1, 1, 1) != 1) throw ApiError::bad_field("n", "n must be 1");
  if (boolean(body, "echo", false))
    throw ApiError::bad_field("echo", "echo is not supported (must be false)");
  read_logprobs(body, &g);
  refuse_unsupported(body);
  return r;
}

void RequestParser::read_logprobs(const json &body, GenerationParams *g) {
  // OpenAI chat: logprobs true plus top_logprobs n. OpenAI completions:
  // logprobs n (the chosen token and n alternatives). llama.cpp: n_probs n > 0.
  constexpr int64_t kMax = VEGAS_MAX_TOP_LOGPROBS;
  if (const json *lp = field(body, "logprobs"); lp && !lp->is_null()) {
    if (lp->is_boolean()) {
      g->logprobs = lp->get<bool>();
    } else if (lp->is_number_integer()) {
      g->logprobs = true;
      g->top_logprobs = static_cast<int32_t>(integer_in(body, "logprobs", 0, 0, kMax));
    } else {
      throw ApiError::bad_field("logprobs", "logprobs must be a boolean or an integer");
    }
  }
  if (const int64_t top = integer_in(body, "top_logprobs", 0, 0, kMax); top > 0) {
    if (!g->logprobs)
      throw ApiError::bad_field("top_logprobs", "top_logprobs needs logprobs: true");
    g->top_logprobs = static_cast<int32_t>(top);
  }
  if (const int64_t n = integer_in(body, "n_probs", 0, 0, kMax); n > 0) {
    g->logprobs = true;
    g->top_logprobs = static_cast<int32_t>(n);
    // llama.cpp: the distribution after the sampling rules instead of the logits'.
    g->processed_logprobs = boolean(body, "post_sampling_probs", false);
  }
}

int32_t RequestParser::output_limit(const json &body, int32_t default_max_tokens) const {
  // max_tokens (OpenAI), max_completion_tokens (newer chat clients) and
  // n_predict (llama.cpp) name one setting: given more than once, they must
  // agree (n_predict used to win silently). n_predict -1 is llama.cpp's "no
  // limit" (our ceiling), and n_predict 0 asks for the prompt alone
  // (llama.vscode's warm-up request): an empty completion.
  const char *given = nullptr;
  int64_t value = default_max_tokens;
  for (const char *name : {"max_tokens", "max_completion_tokens", "n_predict"}) {
    const json *v = field(body, name);
    if (!v) continue;
    const bool n_predict = std::string(name) == "n_predict";
    const int64_t x = n_predict && v->is_number_integer() && v->get<int64_t>() == -1
                          ? limits_.max_output_tokens
                          : integer_in(body, name, 0, n_predict ? 0 : 1, limits_.max_output_tokens);
    if (given != nullptr && x != value)
      throw ApiError::bad_field(name, std::string(name) + " (" + std::to_string(x) + ") and " +
                                          given + " (" + std::to_string(value) +
                                          ") disagree: give one");
    given = name;
    value = x;
  }
  return static_cast<int32_t>(value);
}

void RequestParser::refuse_unsupported(const json &body) {
  // Fields that would change the output if honoured, accepted only at values
  // that ask for nothing: one rule, support it or refuse it (a client that
  // sends them must not get an answer that silently ignored them).
  auto empty = [](const json &v) {
    return v.is_null() || ((v.is_object() || v.is_array() || v.is_string()) && v.empty());
  };
  for (const char *name : {"logit_bias", "tools", "functions", "grammar", "json_schema"})
    if (const json *v = field(body, name); v && !empty(*v))
      throw ApiError::bad_field(name, std::string(name) + " is not supported");
  if (const json *v = field(body, "tool_choice"); v && !(v->is_string() && *v == "none"))
    throw ApiError::bad_field("tool_choice", "tool_choice is not supported (only \"none\")");
  if (const json *v = field(body, "function_call"); v && !(v->is_string() && *v == "none"))
    throw ApiError::bad_field("function_call", "function_call is not supported (only \"none\")");
  if (const json *v = field(body, "response_format");
      v && !(v->is_object() && v->size() == 1 && v->value("type", json()) == "text"))
    throw ApiError::bad_field("response_format",
                              "response_format is not supported (only {\"type\": \"text\"})");
  if (const json *v = field(body, "best_of"); v && !(v->is_number_integer() && *v == 1))
    throw ApiError::bad_field("best_of", "best_of must be 1");
}

ParsedRequest RequestParser::completion(const json &body) const {
  ParsedRequest r = common(body, 16, 1.0);
  const json *prompt = field(body, "prompt");
  if (!prompt) throw ApiError::bad_field("prompt", "prompt is required");
  const std::string suffix = string_field(body, "suffix", false);
  if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string())
    prompt = &(*prompt)[0];  // a batch of one prompt
  if (prompt->is_string()) {
    const std::string text = prompt->get<std::string>();
    check_prompt_bytes(text.size() + suffix.size(), "prompt");
    // With a suffix the completion fills the middle, as OpenAI's `suffix`.
    r.gen.prompt = suffix.empty() ? format_->plain(text) : format_->infill(text, suffix, {}, "");
    if (!suffix.empty()) r.gen.stop_ids = format_->infill_stop_ids();
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    for (const json &t : *prompt) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= limits_.vocab_size)
        throw ApiError::bad_field("prompt", "prompt token ids must be integers in [0, " +
                                                std::to_string(limits_.vocab_size) + ")");
      r.gen.prompt.push_back(t.get<int32_t>());
    }
  } else if (prompt->is_array() && prompt->size() > 1) {
    throw ApiError::bad_field("prompt", "prompt: only one prompt per request is supported");
  } else {
    throw ApiError::bad_field("prompt", "prompt must be a string or an array of token ids");
  }
  check_prompt_length(r.gen.prompt, "prompt");
  return r;
}

ParsedRequest RequestParser::chat(const json &body) const {
  ParsedRequest r = common(body, limits_.max_output_tokens, 1.0);
  const json *messages = field(body, "messages");
  if (!messages) throw ApiError::bad_field("messages", "messages is required");
  if (!messages->is_array() || messages->empty())
    throw ApiError::bad_field("messages", "messages must be a non-empty array");
  std::vector<ChatMessage> list;
  for (size_t i = 0; i < messages->size(); ++i) {
    const json &m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw ApiError::bad_field(where, where + " must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      throw ApiError::bad_field(where + ".role", where + ".role must be a string");
    const std::string role_name = role->get<std::string>();
    if (role_name != "system" && role_name != "user" && role_name != "assistant" &&
        role_name != "developer")
      throw ApiError::bad_field(where + ".role", where +
                                                     ".role must be system, developer, user "
                                                     "or assistant, got \"" +
                                                     role_name + "\"");
    auto content = m.find("content");
    if (content == m.end())
      throw ApiError::bad_field(where + ".content", where + ".content is required");
    list.push_back(
        ChatMessage{role_name == "developer" ? "system" : role_name, message_content(*content, i)});
  }
  uint64_t bytes = 0;
  for (const ChatMessage &m : list) bytes += m.content.size();
  check_prompt_bytes(bytes, "messages");
  r.gen.prompt = format_->chat(list);
  r.gen.stop_ids = format_->chat_stop_ids();
  check_prompt_length(r.gen.prompt, "messages");
  return r;
}

ParsedRequest RequestParser::infill(const json &body) const {
  // Greedy by default: an editor wants the same completion for the same context.
  ParsedRequest r = common(body, limits_.max_output_tokens, 0.0);
  const std::string prefix = string_field(body, "input_prefix", true);
  const std::string suffix = string_field(body, "input_suffix", false);
  const std::string prompt = string_field(body, "prompt", false);
  std::vector<InfillFile> extra;
  if (const json *e = field(body, "input_extra")) {
    if (!e->is_array()) throw ApiError::bad_field("input_extra", "input_extra must be an array");
    for (size_t i = 0; i < e->size(); ++i) {
      const json &f = (*e)[i];
      const std::string where = "input_extra[" + std::to_string(i) + "]";
      if (!f.is_object()) throw ApiError::bad_field(where, where + " must be an object");
      InfillFile file;
      auto name = f.find("filename");
      if (name != f.end() && !name->is_null()) {
        if (!name->is_string())
          throw ApiError::bad_field(where + ".filename", where + ".filename must be a string");
        file.filename = name->get<std::string>();
      }
      auto text = f.find("text");
      if (text == f.end() || !text->is_string())
        throw ApiError::bad_field(where + ".text", where + ".text must be a string");
      file.text = text->get<std::string>();
      extra.push_back(std::move(file));
    }
  }
  uint64_t bytes = prefix.size() + suffix.size() + prompt.size();
  for (const InfillFile &f : extra) bytes += f.filename.size() + f.text.size();
  check_prompt_bytes(bytes, "input_prefix");
  r.gen.prompt = format_->infill(prefix, suffix, extra, prompt);
  r.gen.stop_ids = format_->infill_stop_ids();
  check_prompt_length(r.gen.prompt, "input_prefix");
  return r;
}

}  // namespace vegas_server
