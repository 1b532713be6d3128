#include "info_routes.h"

#include "api_error.h"
#include "http_api.h"
#include "response_format.h"
#include "vegas.h"

namespace vegas_server {

namespace {

using nlohmann::json;

void send_json(httplib::Response &res, int status, const json &body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

bool flag(const json &body, const char *name, bool fallback) {
  if (!body.contains(name) || body[name].is_null()) return fallback;
  if (!body[name].is_boolean())
    throw ApiError::bad_field(name, std::string(name) + " must be a boolean");
  return body[name].get<bool>();
}

// Valid UTF-8 (the piece as text) or not (its bytes, as llama-server does).
bool valid_utf8(const std::string &s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::exception &) {
    return false;
  }
}

// Answers 200 with handle(body), or the ApiError it throws.
template <typename Handler>
void answer(const httplib::ContentReader &reader, httplib::Response &res, Handler handle) {
  std::string raw;
  if (!read_body(reader, &raw, res)) return;
  try {
    send_json(res, 200, handle(RequestParser::parse_body(raw)));
  } catch (const ApiError &e) {
    send_json(res, e.http_status(), e.to_json());
  }
}

}  // namespace

void InfoRoutes::tokenize(const httplib::ContentReader &reader, httplib::Response &res) const {
  answer(reader, res, [this](const json &body) {
    if (!body.contains("content") || !body["content"].is_string())
      throw ApiError::bad_field("content", "content must be a string");
    const std::string &text = body["content"].get_ref<const std::string &>();
    if (limits_.max_prompt_bytes > 0 && text.size() > limits_.max_prompt_bytes)
      throw ApiError::bad_field("content", "content has " + std::to_string(text.size()) +
                                               " bytes, more than a prompt may hold");
    const std::vector<int32_t> ids = format_->tokenize(text, flag(body, "add_special", false),
                                                       flag(body, "parse_special", true));
    json tokens = json::array();
    const bool with_pieces = flag(body, "with_pieces", false);
    for (const int32_t id : ids) {
      if (!with_pieces) {
        tokens.push_back(id);
        continue;
      }
      const std::string piece = format_->piece(id);
      json p = valid_utf8(piece) ? json(piece) : json::array();
      if (p.is_array())
        for (const unsigned char b : piece) p.push_back(b);
      tokens.push_back({{"id", id}, {"piece", p}});
    }
    return json{{"tokens", tokens}};
  });
}

void InfoRoutes::detokenize(const httplib::ContentReader &reader, httplib::Response &res) const {
  answer(reader, res, [this](const json &body) {
    if (!body.contains("tokens") || !body["tokens"].is_array())
      throw ApiError::bad_field("tokens", "tokens must be an array of token ids");
    const json &list = body["tokens"];
    const size_t most = static_cast<size_t>(limits_.max_prompt_tokens) +
                        static_cast<size_t>(limits_.max_output_tokens);
    if (list.size() > most)
      throw ApiError::bad_field("tokens", "tokens has " + std::to_string(list.size()) +
                                              " ids, more than " + std::to_string(most));
    std::vector<int32_t> ids;
    for (const json &t : list) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= limits_.vocab_size)
        throw ApiError::bad_field("tokens", "tokens: " + t.dump() + " is not a token id in [0, " +
                                                std::to_string(limits_.vocab_size) + ")");
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return json{{"content", format_->detokenize(ids)}};
  });
}

json InfoRoutes::props() const {
  const int32_t n_ctx = limits_.max_prompt_tokens + limits_.max_output_tokens;
  json p = {{"default_generation_settings",
             {{"n_ctx", n_ctx},
              {"params", {{"n_predict", limits_.max_output_tokens}, {"temperature", 1.0}}}}},
            {"total_slots", options_.parallel},
            {"model_path", options_.model_dir},
            {"model_alias", model_name_},
            {"max_prompt_tokens", limits_.max_prompt_tokens},
            {"max_output_tokens", limits_.max_output_tokens},
            {"mode", options_.mode},
            {"build_info", std::string("libvegas ") + vegas_version()}};
  // The format the server applies (vegas_chat_tokenize), as Jinja.
  const std::string &chat = format_->chat_format();
  p["chat_format"] = chat;
  p["chat_template"] =
      chat == "chatml" ? "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ "
                         "message['content'] }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n"
      : chat == "llama3"
          ? "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] "
            "}}<|end_header_id|>\n\n{{ message['content'] | trim }}<|eot_id|>{% endfor "
            "%}<|start_header_id|>assistant<|end_header_id|>\n\n"
          : "";
  return p;
}

void InfoRoutes::install(httplib::Server *server) {
  server->Post("/tokenize",
               [this](const httplib::Request &, httplib::Response &res,
                      const httplib::ContentReader &reader) { tokenize(reader, res); });
  server->Post("/detokenize",
               [this](const httplib::Request &, httplib::Response &res,
                      const httplib::ContentReader &reader) { detokenize(reader, res); });
  server->Get("/props", [this](const httplib::Request &, httplib::Response &res) {
    send_json(res, 200, props());
  });
}

}  // namespace vegas_server
