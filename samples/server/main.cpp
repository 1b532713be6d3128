// vegas-server: an OpenAI-compatible completion server for IDEs (completions,
// chat, fill-in-the-middle, streaming, many clients at once), written against
// the public C ABI alone (include/vegas.h).
//
//   vegas-server --port 8080                 # embedded model, 127.0.0.1, vegas mode
//   vegas-server --port 0 --api-key secret   # any free port, printed on stdout
#include <pthread.h>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <httplib.h>
#include <CLI/CLI.hpp>

#include "connection_front.h"
#include "engine.h"
#include "http_api.h"
#include "info_routes.h"
#include "metrics.h"
#include "prompt_format.h"
#include "request_parser.h"
#include "server_options.h"
#include "vegas.h"

namespace vegas_server {
namespace {

// The longest byte string one token of the vocabulary stands for.
size_t longest_token_bytes(const vegas_tokenizer *tokenizer, int32_t vocab_size) {
  size_t longest = 1;
  char piece[256];
  for (int32_t id = 0; id < vocab_size; ++id) {
    size_t n = 0;
    const vegas_status st = vegas_token_to_piece(tokenizer, id, piece, sizeof piece, &n);
    if (st == VEGAS_OK || st == VEGAS_ERR_BUFFER_TOO_SMALL) longest = std::max(longest, n);
  }
  return longest;
}

std::string default_model_dir() {
  if (const char *env = std::getenv("VEGAS_MODEL_DIR")) return env;
  return VEGAS_DEFAULT_MODEL_DIR;
}

void add_options(CLI::App &app, ServerOptions &o) {
  o.model_dir = default_model_dir();
  app.add_option("--model", o.model_dir, "Hugging Face model directory")->capture_default_str();
  app.add_option("--model-name", o.model_name,
                 "model id reported by /v1/models (default: the "
                 "directory name)");
  app.add_option("--host", o.host, "address to bind")->capture_default_str();
  app.add_option("--port", o.port, "port; 0 picks a free one and prints it")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--api-key", o.api_key,
                 "require 'Authorization: Bearer KEY' (also from $VEGAS_API_KEY)")
      ->envname("VEGAS_API_KEY");
  app.add_option("--backend", o.backend, "cpu, cuda or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads, 0 = all cores")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--mode", o.mode,
                 "vegas (speculative, lossless), vanilla, or auto (vegas while it pays)")
      ->check(CLI::IsMember({"vegas", "vanilla", "auto"}))
      ->capture_default_str();
  app.add_option("--policy", o.policy,
                 "KV selection policy of the vegas mode (default vegas; auto mode: vegas+lookup)");
  app.add_option("--gamma", o.gamma, "draft length of the vegas mode")
      ->check(CLI::Range(1, VEGAS_MAX_GAMMA))
      ->capture_default_str();
  app.add_option("--parallel", o.parallel, "requests decoded together")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--max-queue", o.max_queue, "requests waiting for a slot before 503")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--max-prompt-tokens", o.max_prompt_tokens, "longest prompt accepted")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  app.add_option("--max-output-tokens", o.max_output_tokens, "largest max_tokens accepted")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  app.add_option("--http-threads", o.http_threads,
                 "HTTP worker threads, 0 = parallel + max-queue + 4")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_option("--max-connections", o.max_connections, "open client connections, 503 beyond")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--max-client-connections", o.max_client_connections,
                 "open connections from one client address, 503 beyond")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--request-timeout", o.request_timeout,
                 "seconds a request's head and body may take to arrive, 408 beyond")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--kv-tokens", o.kv_tokens,
                 "KV pool in tokens, shared by the slots as they need it (pages are taken on "
                 "demand; a sequence that finds none ends with a 503); 0 = every slot at its "
                 "longest prompt + output")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 34))
      ->capture_default_str();
  app.add_option("--drain-timeout", o.drain_timeout,
                 "seconds running generations may finish in after SIGTERM, then cancelled")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
}

// Waits until no request is upstream of the front, or the deadline.
void wait_until_answered(const ConnectionFront &front, std::chrono::steady_clock::duration limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (front.in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

void wait_for_stop_signal() {
  sigset_t set;  // blocked in every thread (see main): only this wait takes them
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
}

[[noreturn]] void die(const char *what, vegas_status status) {
  std::fprintf(stderr, "vegas-server: %s: %s: %s\n", what, vegas_status_name(status),
               vegas_last_error());
  std::exit(1);
}

std::string directory_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The model (owned: its borrowed tokenizer lives as long as it), its info and
// tokenizer; exits on failure.
struct ServedModel {
  std::unique_ptr<vegas_model, void (*)(vegas_model *)> model{nullptr, vegas_model_free};
  const vegas_tokenizer *tokenizer = nullptr;
  vegas_model_info info{};
};
ServedModel load_served_model(const ServerOptions &o) {
  vegas_model_options mo;
  vegas_model_options_init(&mo);
  mo.backend = o.backend == "cpu"    ? VEGAS_BACKEND_CPU
               : o.backend == "cuda" ? VEGAS_BACKEND_CUDA
                                     : VEGAS_BACKEND_AUTO;
  mo.n_threads = o.threads;
  vegas_model *model = nullptr;
  vegas_status st = vegas_model_load(o.model_dir.c_str(), &mo, &model);
  if (st != VEGAS_OK) die("loading the model", st);
  ServedModel m;
  m.model.reset(model);
  m.tokenizer = vegas_model_tokenizer(model);
  if (m.tokenizer == nullptr) die("the model has no tokenizer", VEGAS_ERR_UNSUPPORTED);
  m.info.struct_size = sizeof(m.info);
  st = vegas_model_get_info(model, &m.info);
  if (st != VEGAS_OK) die("model info", st);
  return m;
}

// The session all slots share, with KV for every slot at its longest by
// default: prompt + output, a speculative round and a page of slack each;
// sequences that still overflow (or find the smaller pool of --kv-tokens
// full) end with KV_FULL. Exits on failure.
vegas_session *create_served_session(const ServerOptions &o, const ServedModel &m,
                                     uint64_t *kv_tokens) {
  vegas_session_options so;
  vegas_session_options_init(&so);
  so.mode = o.mode == "vegas"  ? VEGAS_MODE_VEGAS
            : o.mode == "auto" ? VEGAS_MODE_AUTO
                               : VEGAS_MODE_VANILLA;
  so.policy = o.policy.empty() ? nullptr : o.policy.c_str();
  so.gamma = o.gamma;
  so.max_batch = o.parallel;
  const uint64_t tokens_per_slot = static_cast<uint64_t>(o.max_prompt_tokens) +
                                   static_cast<uint64_t>(o.max_output_tokens) +
                                   static_cast<uint64_t>(o.gamma) + 1 + 2 * 16;
  *kv_tokens = o.kv_tokens > 0 ? static_cast<uint64_t>(o.kv_tokens)
                               : tokens_per_slot * static_cast<uint64_t>(o.parallel);
  so.kv_bytes = *kv_tokens * m.info.kv_bytes_per_token;
  vegas_session *session = nullptr;
  const vegas_status st = vegas_session_create(m.model.get(), &so, &session);
  if (st != VEGAS_OK) die("creating the session", st);
  return session;
}

FrontLimits front_limits(const ServerOptions &o) {
  FrontLimits l;
  l.max_body_bytes = kMaxBodyBytes;
  l.request_deadline = std::chrono::seconds(o.request_timeout);
  l.max_connections = static_cast<size_t>(o.max_connections);
  l.max_per_client = static_cast<size_t>(o.max_client_connections);
  return l;
}

// SIGTERM drains: no new requests (503), running ones may finish within the
// drain timeout, then they are cancelled and their streams still end with a
// final event; only then do the sockets close.
void drain_and_stop(const ServerOptions &o, ConnectionFront &front, Engine &engine,
                    httplib::Server &server) {
  front.drain();
  wait_until_answered(front, std::chrono::seconds(o.drain_timeout));
  engine.stop();
  wait_until_answered(front, std::chrono::seconds(5));
  front.stop();
  server.stop();
}

int serve(const ServerOptions &o) {
  const ServedModel m = load_served_model(o);
  uint64_t kv_tokens = 0;
  vegas_session *session = create_served_session(o, m, &kv_tokens);

  const std::string model_name = o.model_name.empty() ? directory_name(o.model_dir) : o.model_name;
  Metrics metrics;
  PromptFormat format(m.tokenizer);
  Engine engine(session, &format, o.parallel, o.max_queue, &metrics);
  RequestLimits limits;
  limits.max_prompt_tokens = o.max_prompt_tokens;
  limits.max_output_tokens = o.max_output_tokens;
  limits.vocab_size = m.info.vocab_size;
  limits.max_prompt_bytes = max_prompt_text_bytes(
      o.max_prompt_tokens, longest_token_bytes(m.tokenizer, m.info.vocab_size));
  RequestParser parser(&format, limits);
  HttpApi api(o, model_name, &engine, &metrics, &parser);

  // Clients talk to the front; httplib's workers listen on loopback behind it
  // and answer one request per connection.
  ConnectionFront front(front_limits(o));
  api.set_client_connected([&front](uint64_t id) { return front.alive(id); });

  httplib::Server server;
  // Handler threads block while their request decodes: one per slot and queued request.
  const size_t http_threads =
      o.http_threads > 0 ? static_cast<size_t>(o.http_threads)
                         : static_cast<size_t>(o.parallel) + static_cast<size_t>(o.max_queue) + 4;
  server.new_task_queue = [http_threads] { return new httplib::ThreadPool(http_threads); };
  server.set_payload_max_length(kMaxBodyBytes);
  server.set_keep_alive_max_count(1);
  api.install(&server);
  InfoRoutes info_routes(o, model_name, &format, limits);
  info_routes.install(&server);

  const int port = front.bind(o.host, o.port);
  const int upstream_port = port < 0 ? -1 : server.bind_to_any_port("127.0.0.1");
  if (port < 0 || upstream_port < 0) {
    std::fprintf(stderr, "vegas-server: cannot listen on %s:%d\n", o.host.c_str(), o.port);
    return 1;
  }
  front.set_upstream_port(upstream_port);
  std::thread workers([&server] { server.listen_after_bind(); });
  std::thread front_thread([&front] { front.run(); });

  std::fprintf(stderr, "vegas-server: KV pool %.0f MiB (%llu tokens for %d slots)\n",
               static_cast<double>(kv_tokens * m.info.kv_bytes_per_token) / (1 << 20),
               static_cast<unsigned long long>(kv_tokens), o.parallel);
  std::printf("vegas-server: listening on http://%s:%d (model %s, mode %s, %d slots)\n",
              o.host.c_str(), port, model_name.c_str(), o.mode.c_str(), o.parallel);
  std::fflush(stdout);

  wait_for_stop_signal();
  drain_and_stop(o, front, engine, server);
  front_thread.join();
  workers.join();
  std::printf("vegas-server: stopped\n");
  return 0;
}

}  // namespace
}  // namespace vegas_server

int main(int argc, char **argv) {
  if (vegas_version_number() != VEGAS_VERSION_NUMBER) {
    std::fprintf(stderr, "vegas-server: header %d and library %u versions differ\n",
                 VEGAS_VERSION_NUMBER, vegas_version_number());
    return 1;
  }
  CLI::App app{std::string("vegas-server ") + vegas_version() +
               ": OpenAI-compatible completion server on libvegas"};
  vegas_server::ServerOptions options;
  vegas_server::add_options(app, options);
  CLI11_PARSE(app, argc, argv);

  // A write to a closed socket must fail with EPIPE, not kill the server. The
  // stop signals go to the waiting thread of serve() only.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return vegas_server::serve(options);
}
