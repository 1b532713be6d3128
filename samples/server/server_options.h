// The command-line settings of vegas-server, read once at start-up.
#pragma once

#include <cstdint>
#include <string>

namespace vegas_server {

struct ServerOptions {
  std::string model_dir;
  std::string host = "127.0.0.1";  // loopback only unless asked otherwise
  int port = 8080;                 // 0 = any free port (printed on stdout)
  std::string api_key;             // empty = no authentication
  std::string backend = "auto";
  int32_t threads = 0;           // CPU threads of the model, 0 = all cores
  std::string mode = "vanilla";  // or "vegas" (speculative, lossless; slower on CPU: README)
  // KV selection policy of the vegas mode; empty: the library's default
  // (vegas; auto mode: vegas+lookup).
  std::string policy;
  int32_t gamma = 6;
  int32_t parallel = 16;   // sequences decoded together (continuous batching slots)
  int32_t max_queue = 64;  // requests waiting for a slot before 503
  int32_t max_prompt_tokens = 2048;
  int32_t max_output_tokens = 512;
  int32_t http_threads = 0;              // 0 = parallel + max_queue + 4
  std::string model_name;                // the id /v1/models reports; default: the directory name
  int32_t max_connections = 1024;        // open client connections (connection_front.h)
  int32_t max_client_connections = 256;  // of them from one address
  int32_t request_timeout = 30;          // seconds for a request's head and body to arrive
  int32_t drain_timeout = 10;            // seconds generations may finish in after SIGTERM
  int64_t kv_tokens = 0;                 // KV pool in tokens; 0 = every slot at its longest
};

}  // namespace vegas_server
