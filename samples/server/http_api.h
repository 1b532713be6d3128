// The HTTP endpoints: OpenAI's /v1/completions, /v1/chat/completions and
// /v1/models, llama.cpp's /infill, /health and Prometheus /metrics. Handlers run
// on httplib's worker threads; generation goes through the Engine.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include <httplib.h>

#include "engine.h"
#include "metrics.h"
#include "request_parser.h"
#include "server_options.h"

namespace vegas_server {

class HttpApi {
 public:
  HttpApi(const ServerOptions &options, std::string model_name, Engine *engine, Metrics *metrics,
          const RequestParser *parser);

  // Registers the routes, the API key check and the error handlers.
  void install(httplib::Server *server);
  // How a handler learns that its client left (ConnectionFront::alive): a
  // generation nobody will read is cancelled. Set before install.
  void set_client_connected(std::function<bool(uint64_t)> connected) {
    client_connected_ = std::move(connected);
  }

  enum class Endpoint { kCompletion, kChat, kInfill };

 private:
  void generate(const httplib::Request &req, const httplib::ContentReader &reader,
                httplib::Response &res, Endpoint endpoint);
  // Whether the request's client has gone, as the front saw it.
  std::function<bool()> client_watch(const httplib::Request &req) const;
  // Refuses a request whose "model" names another model than the one served.
  void check_model(const nlohmann::json &body) const;
  bool authorized(const httplib::Request &req) const;

  const ServerOptions &options_;
  const std::string model_name_;
  Engine *engine_;
  Metrics *metrics_;
  const RequestParser *parser_;
  std::atomic<uint64_t> next_id_{1};
  std::function<bool(uint64_t)> client_connected_;
};

// The largest request body read (after any Content-Encoding is undone), 413 beyond.
constexpr size_t kMaxBodyBytes = size_t{16} << 20;

// Reads the request body through httplib's content reader under kMaxBodyBytes;
// false when it answered instead (413, or 400 for a body that could not be read).
bool read_body(const httplib::ContentReader &reader, std::string *body, httplib::Response &res);

// Key comparison whose time does not depend on how much of the key matches.
bool constant_time_equal(const std::string &expected, const std::string &given);

}  // namespace vegas_server
