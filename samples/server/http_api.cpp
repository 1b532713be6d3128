#include "http_api.h"

#include <cctype>
#include <chrono>
#include <ctime>
#include <functional>
#include <iterator>
#include <memory>
#include <utility>

#include "api_error.h"
#include "connection_front.h"
#include "response_format.h"

namespace vegas_server {

using nlohmann::json;

bool constant_time_equal(const std::string &expected, const std::string &given) {
  // The loop runs over the given string whatever its content; a length mismatch
  // is folded into the result instead of returning early.
  unsigned char diff = expected.size() != given.size() ? 1 : 0;
  const size_t n = expected.size();
  for (size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ (n ? expected[i % n] : 0));
  return diff == 0 && n != 0;
}

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(250);
constexpr auto kKeepAliveAfter = std::chrono::seconds(2);

void send_json(httplib::Response &res, int status, const json &body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

// Streams one job as Server-Sent Events; lives as long as httplib's content provider.
class EventStream {
 public:
  EventStream(std::shared_ptr<GenerationJob> job, ResponseContext ctx, bool include_usage,
              std::function<bool()> client_left)
      : job_(std::move(job)),
        ctx_(std::move(ctx)),
        include_usage_(include_usage),
        client_left_(std::move(client_left)) {}

  // httplib calls this until sink.done(); false drops the connection.
  bool pump(httplib::DataSink &sink) {
    if (client_left_()) {
      job_->cancel();
      return false;
    }
    std::string text;
    std::vector<TokenLogprobs> logprobs;
    const bool more = job_->wait_for_text(&text, kPollInterval, &logprobs);
    const auto now = std::chrono::steady_clock::now();
    if (!text.empty() || !logprobs.empty()) {
      if (!write(sink, sse_event(stream_chunk(ctx_, text, first_, logprobs, text_offset_))))
        return false;
      text_offset_ += token_text_bytes(logprobs);
      first_ = false;
    } else if (more && now - last_write_ >= kKeepAliveAfter) {
      // An SSE comment: keeps proxies patient and notices a departed client.
      if (!write(sink, ": keep-alive\n\n")) return false;
    }
    if (more) return true;
    const GenerationResult r = job_->wait_result();
    if (r.finish_reason == VEGAS_FINISH_ERROR) {
      if (!write(sink, sse_event(ApiError(500, "", r.error).to_json()))) return false;
    } else {
      if (!write(sink, sse_event(stream_final_chunk(ctx_, r)))) return false;
      if (include_usage_ && ctx_.endpoint != HttpApi::Endpoint::kInfill &&
          !write(sink, sse_event(stream_usage_chunk(ctx_, r))))
        return false;
    }
    if (ctx_.endpoint != HttpApi::Endpoint::kInfill && !write(sink, "data: [DONE]\n\n"))
      return false;
    sink.done();
    return true;
  }

  // httplib is done with the response: if the job still runs, nobody listens any more.
  void release() {
    if (!job_->finished()) job_->cancel();
  }

 private:
  bool write(httplib::DataSink &sink, const std::string &data) {
    last_write_ = std::chrono::steady_clock::now();
    if (sink.write(data.data(), data.size())) return true;
    job_->cancel();  // the client disconnected
    return false;
  }

  std::shared_ptr<GenerationJob> job_;
  ResponseContext ctx_;
  bool include_usage_;
  std::function<bool()> client_left_;
  bool first_ = true;
  int64_t text_offset_ = 0;  // bytes of token text streamed (completions' text_offset)
  std::chrono::steady_clock::time_point last_write_ = std::chrono::steady_clock::now();
};

}  // namespace

// The request body through httplib's content reader, so that the limit holds
// for chunked bodies and for the bytes after a Content-Encoding is undone
// (httplib 0.11 applies set_payload_max_length to a Content-Length alone: a
// 40 MB chunked body or 27 KB of gzip inflating to 18 MiB were read whole).
// Returns false when it answered instead (413, or 400 for a body that could
// not be read): the rest of the body is unread, so the connection closes
// (httplib would read it as further requests).
bool read_body(const httplib::ContentReader &reader, std::string *body, httplib::Response &res) {
  bool too_large = false;
  const bool ok = reader([&](const char *data, size_t n) {
    if (n > kMaxBodyBytes - body->size()) {
      too_large = true;
      return false;
    }
    body->append(data, n);
    return true;
  });
  if (ok && !too_large) return true;
  const ApiError e = too_large ? ApiError(413, "",
                                          "the request body is larger than " +
                                              std::to_string(kMaxBodyBytes >> 20) + " MiB")
                               : ApiError(400, "", "the request body could not be read");
  res.set_header("Connection", "close");
  send_json(res, e.http_status(), e.to_json());
  return false;
}

HttpApi::HttpApi(const ServerOptions &options, std::string model_name, Engine *engine,
                 Metrics *metrics, const RequestParser *parser)
    : options_(options),
      model_name_(std::move(model_name)),
      engine_(engine),
      metrics_(metrics),
      parser_(parser) {}

bool HttpApi::authorized(const httplib::Request &req) const {
  if (options_.api_key.empty()) return true;
  // The header's whole value: httplib's get_header_value hands it over as a C
  // string, which cut "Bearer KEY\0junk" at the NUL and accepted it. One
  // Authorization header, "Bearer" SP token (RFC 6750; the scheme is
  // case-insensitive).
  const auto range = req.headers.equal_range("Authorization");
  if (range.first == range.second || std::next(range.first) != range.second) return false;
  const std::string &header = range.first->second;
  static constexpr char kScheme[] = "bearer";
  constexpr size_t kSchemeLength = sizeof kScheme - 1;
  if (header.size() <= kSchemeLength || header[kSchemeLength] != ' ') return false;
  for (size_t i = 0; i < kSchemeLength; ++i)
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return false;
  return constant_time_equal(options_.api_key, header.substr(kSchemeLength + 1));
}

std::function<bool()> HttpApi::client_watch(const httplib::Request &req) const {
  const std::string id = req.get_header_value(kFrontConnectionHeader);
  if (!client_connected_ || id.empty() || id.size() > 19 ||
      id.find_first_not_of("0123456789") != std::string::npos)
    return [] { return false; };  // not through the front: only a failed write tells
  return [this, connection = std::stoull(id)] { return !client_connected_(connection); };
}

// A request naming another model than the one served is refused, as vLLM
// does (404); no model, or an empty name, means the served one.
void HttpApi::check_model(const json &body) const {
  const auto model = body.find("model");
  if (model == body.end() || model->is_null()) return;
  if (!model->is_string()) throw ApiError::bad_field("model", "model must be a string");
  const std::string name = model->get<std::string>();
  if (name.empty() || name == model_name_) return;
  throw ApiError(404, "model",
                 "model: \"" + name + "\" is not served here; this server serves \"" + model_name_ +
                     "\" (GET /v1/models)");
}

void HttpApi::generate(const httplib::Request &req, const httplib::ContentReader &reader,
                       httplib::Response &res, Endpoint endpoint) {
  const std::function<bool()> client_left = client_watch(req);
  std::string raw;
  if (!read_body(reader, &raw, res)) {
    metrics_->requests_invalid.fetch_add(1);
    return;
  }
  try {
    const json body = RequestParser::parse_body(raw);
    check_model(body);
    ParsedRequest parsed = endpoint == Endpoint::kCompletion ? parser_->completion(body)
                           : endpoint == Endpoint::kChat     ? parser_->chat(body)
                                                             : parser_->infill(body);
    auto job = std::make_shared<GenerationJob>(std::move(parsed.gen));
    switch (engine_->submit(job)) {
      case Engine::Admission::kAccepted:
        break;
      case Engine::Admission::kQueueFull:
        throw ApiError(503, "",
                       "the server is busy: " + std::to_string(options_.max_queue) +
                           " requests already wait; retry later");
      case Engine::Admission::kStopping:
        throw ApiError(503, "", "the server is shutting down");
    }
    metrics_->requests_accepted.fetch_add(1);
    ResponseContext ctx;
    ctx.endpoint = endpoint;
    ctx.id = (endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-") +
             std::to_string(next_id_.fetch_add(1));
    ctx.created = static_cast<int64_t>(std::time(nullptr));
    ctx.model = model_name_;
    ctx.logprobs = job->params().logprobs;
    ctx.processed_logprobs = job->params().processed_logprobs;
    if (parsed.stream) {
      auto stream =
          std::make_shared<EventStream>(job, std::move(ctx), parsed.include_usage, client_left);
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [stream](size_t, httplib::DataSink &sink) { return stream->pump(sink); },
          [stream](bool) { stream->release(); });
      return;
    }
    std::string text, piece;
    std::vector<TokenLogprobs> logprobs, more;
    while (job->wait_for_text(&piece, kPollInterval, &more)) {
      text += piece;
      logprobs.insert(logprobs.end(), more.begin(), more.end());
      if (client_left()) job->cancel();  // nobody will read the answer
    }
    const GenerationResult r = job->wait_result();
    if (r.finish_reason == VEGAS_FINISH_ERROR) {
      // The library refused what the request asked for (validated here first, so
      // rare); a sequence that failed while decoding is the server's fault.
      const bool client_fault = r.at_submit && (r.status == VEGAS_ERR_INVALID_ARGUMENT ||
                                                r.status == VEGAS_ERR_TOKEN_OUT_OF_RANGE);
      const int status = r.status == VEGAS_ERR_KV_FULL ? 503 : client_fault ? 400 : 500;
      throw ApiError(status, "", r.error);
    }
    send_json(res, 200, full_response(ctx, text, r, logprobs));
  } catch (const ApiError &e) {
    if (e.http_status() == 503)
      metrics_->requests_rejected.fetch_add(1);
    else if (e.http_status() < 500)
      metrics_->requests_invalid.fetch_add(1);
    send_json(res, e.http_status(), e.to_json());
  }
}

void HttpApi::install(httplib::Server *server) {
  server->set_pre_routing_handler([this](const httplib::Request &req, httplib::Response &res) {
    if (req.path == "/health" || authorized(req))
      return httplib::Server::HandlerResponse::Unhandled;
    metrics_->requests_unauthorized.fetch_add(1);
    res.set_header("WWW-Authenticate", "Bearer");
    send_json(res, 401,
              ApiError(401, "", "missing or wrong API key (Authorization: Bearer)").to_json());
    return httplib::Server::HandlerResponse::Handled;
  });
  // Content-reader handlers: the body is read in generate, under kMaxBodyBytes.
  const std::pair<const char *, Endpoint> routes[] = {{"/v1/completions", Endpoint::kCompletion},
                                                      {"/v1/chat/completions", Endpoint::kChat},
                                                      {"/infill", Endpoint::kInfill}};
  for (const auto &[path, endpoint] : routes)
    server->Post(path,
                 [this, endpoint = endpoint](const httplib::Request &req, httplib::Response &res,
                                             const httplib::ContentReader &reader) {
                   generate(req, reader, res, endpoint);
                 });
  server->Get("/v1/models", [this](const httplib::Request &, httplib::Response &res) {
    send_json(res, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", model_name_},
                                      {"object", "model"},
                                      {"created", 0},
                                      {"owned_by", "libvegas"}}})}});
  });
  server->Get("/health", [](const httplib::Request &, httplib::Response &res) {
    send_json(res, 200, {{"status", "ok"}});
  });
  server->Get("/metrics", [this](const httplib::Request &, httplib::Response &res) {
    res.set_content(metrics_->render_prometheus(options_.mode), "text/plain; version=0.0.4");
  });
  // 404, 405, 413 and friends get a JSON body too.
  server->set_error_handler([this](const httplib::Request &req, httplib::Response &res) {
    if (!res.body.empty()) return;
    if (res.status >= 400 && res.status < 500) metrics_->requests_invalid.fetch_add(1);
    const std::string message = res.status == 404
                                    ? "no such endpoint: " + req.method + " " + req.path
                                : res.status == 413 ? "the request body is too large"
                                                    : "the request failed";
    send_json(res, res.status, ApiError(res.status, "", message).to_json());
  });
  server->set_exception_handler(
      [](const httplib::Request &, httplib::Response &res, std::exception_ptr ep) {
        std::string message = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception &e) {
          message += std::string(": ") + e.what();
        } catch (...) {
        }
        send_json(res, 500, ApiError(500, "", message).to_json());
      });
}

}  // namespace vegas_server
