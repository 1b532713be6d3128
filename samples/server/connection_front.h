// The connection front: the socket clients talk to. One thread reads each
// request whole (head and body, under size limits and one deadline), and only
// then hands it to httplib's workers on a loopback port, one request per
// upstream connection, and relays the answer back. So a client that drips its
// bytes or floods headers costs the front a bounded buffer and never holds a
// worker (httplib 0.11 caps neither the header count nor a request's time),
// /health is answered here while every worker is busy, and a handler can ask
// whether its client is still connected (alive), which httplib 0.11 cannot tell.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "request_head.h"

namespace vegas_server {

struct FrontLimits {
  HeadLimits head;
  uint64_t max_body_bytes = uint64_t{16} << 20;       // decoded chunked or Content-Length, 413
  std::chrono::milliseconds request_deadline{30000};  // head and body, 408 beyond
  size_t max_connections = 1024;                      // open client connections, 503 beyond
  size_t max_per_client = 256;                        // per client address, 503 beyond
  uint64_t max_buffered_bytes = uint64_t{512} << 20;  // requests being read, all together
};

// The header the front adds to each request it forwards (and strips from
// what clients send): the connection's id, for alive().
constexpr char kFrontConnectionHeader[] = "X-Vegas-Front-Connection";

class ConnectionFront {
 public:
  explicit ConnectionFront(FrontLimits limits);
  ~ConnectionFront();
  ConnectionFront(const ConnectionFront &) = delete;
  ConnectionFront &operator=(const ConnectionFront &) = delete;

  // Listens on host:port (0 = any free port); returns the port, or -1.
  int bind(const std::string &host, int port);
  // Where complete requests go: httplib on 127.0.0.1:port.
  void set_upstream_port(int port) { upstream_port_ = port; }

  void run();    // the loop, until stop()
  void drain();  // stop accepting; requests completed from now on get 503
  void stop();   // ends run(), closing every connection
  // Requests handed upstream and not yet answered in full.
  size_t in_flight() const { return in_flight_.load(); }
  // Whether the client of a forwarded request (its kFrontConnectionHeader id)
  // is still connected; ids are never reused. Any thread.
  bool alive(uint64_t id) const;

 private:
  struct Connection;
  void accept_clients();
  void on_client_readable(Connection &c);
  // The parts of a request as its bytes arrive: false while more are due or
  // after replying to a bad one (take_head also prepares the body's reading
  // and a 100 Continue; take_body cuts c.request at the body's end).
  bool take_head(Connection &c);
  bool take_body(Connection &c);
  void on_request_complete(Connection &c);
  void start_upstream(Connection &c);
  void on_upstream_ready(Connection &c, short revents);
  void on_client_event(Connection &c, short revents);
  bool flush_client(Connection &c);
  void linger(Connection &c);
  void reply(Connection &c, int status, const char *reason, const std::string &message);
  void close_connection(uint64_t id);
  void expire(std::chrono::steady_clock::time_point now);
  int poll_timeout_ms(std::chrono::steady_clock::time_point now) const;

  FrontLimits limits_;
  int listener_ = -1;
  int upstream_port_ = 0;
  int wake_[2] = {-1, -1};  // a pipe: drain() and stop() write to it
  std::atomic<bool> draining_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> in_flight_{0};
  uint64_t next_id_ = 1;
  uint64_t buffered_bytes_ = 0;  // request bytes held, all connections
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;
  std::unordered_map<std::string, size_t> per_client_;
  std::chrono::steady_clock::time_point accept_paused_until_{};  // out of descriptors
  mutable std::mutex live_mutex_;
  std::unordered_set<uint64_t> live_;  // forwarded and not closed
};

}  // namespace vegas_server
