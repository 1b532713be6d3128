#include "connection_front.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "api_error.h"
#include "response_format.h"

namespace vegas_server {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadPiece = 64 << 10;
constexpr size_t kRelayBuffer = 256 << 10;                // answer bytes held for a slow client
constexpr size_t kMaxDiscarded = 1 << 20;                 // bytes after a request, before closing
constexpr auto kReplyDeadline = std::chrono::seconds(5);  // to take a local answer
constexpr auto kLingerTime = std::chrono::seconds(2);     // reading after our last byte
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
constexpr size_t kAcceptBurst = 64;
constexpr size_t kHardConnectionSlack = 64;  // refused with 503 beyond the caps, closed beyond this

void close_fd(int &fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void set_nodelay(int fd) {
  int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

std::string peer_address(const sockaddr_storage &addr) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in &>(addr).sin_addr, text, sizeof text);
  else if (addr.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 &>(addr).sin6_addr, text, sizeof text);
  return text;
}

bool hop_by_hop_or_ours(const std::string &name) {
  return field_name_is(name, "connection") || field_name_is(name, "keep-alive") ||
         field_name_is(name, "expect") || field_name_is(name, "x-vegas-front-connection");
}

bool would_block() {
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

// Sends buffer[*sent, end) until done or the socket would block; false when
// the peer is gone.
bool send_pending(int fd, const std::string &buffer, size_t *sent) {
  while (*sent < buffer.size()) {
    const ssize_t n = send(fd, buffer.data() + *sent, buffer.size() - *sent, MSG_NOSIGNAL);
    if (n > 0) {
      *sent += static_cast<size_t>(n);
      continue;
    }
    return n < 0 && would_block();
  }
  return true;
}

}  // namespace

struct ConnectionFront::Connection {
  // kRequest: reading it; kUpstream: forwarded, relaying the answer;
  // kReplying: writing an answer of our own; kLingering: after our last byte,
  // reading until the client closes (closing with unread bytes would reset
  // the connection and could destroy the answer in flight).
  enum class Phase { kRequest, kUpstream, kReplying, kLingering };

  Connection(uint64_t id_, int client_, std::string address_, HeadLimits limits)
      : id(id_), client(client_), address(std::move(address_)), head_reader(limits) {}

  uint64_t id;
  int client;
  int upstream = -1;
  std::string address;
  Phase phase = Phase::kRequest;
  Clock::time_point deadline;

  std::string request;  // the bytes read so far (kRequest)
  uint64_t budget = 0;  // of them, counted in buffered_bytes_
  HeadReader head_reader;
  bool head_done = false;
  std::unique_ptr<ChunkedBodyScanner> chunks;

  std::string to_upstream;
  size_t upstream_sent = 0;
  bool upstream_connected = false;
  bool upstream_done = false;  // it closed: the answer is complete once flushed
  bool forwarded = false;      // counted in in_flight_ and live_
  size_t discarded = 0;

  std::string to_client;
  size_t client_sent = 0;
};

ConnectionFront::ConnectionFront(FrontLimits limits) : limits_(limits) {
  if (pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
}

ConnectionFront::~ConnectionFront() {
  for (auto &entry : connections_) {
    close_fd(entry.second->client);
    close_fd(entry.second->upstream);
  }
  close_fd(listener_);
  close_fd(wake_[0]);
  close_fd(wake_[1]);
}

int ConnectionFront::bind(const std::string &host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo *found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  for (addrinfo *a = found; a != nullptr && listener_ < 0; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0)
      listener_ = fd;
    else
      close_fd(fd);
  }
  freeaddrinfo(found);
  if (listener_ < 0) return -1;
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getsockname(listener_, reinterpret_cast<sockaddr *>(&addr), &len) != 0) return -1;
  return ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6 &>(addr).sin6_port
                                          : reinterpret_cast<sockaddr_in &>(addr).sin_port);
}

bool ConnectionFront::alive(uint64_t id) const {
  std::lock_guard<std::mutex> lock(live_mutex_);
  return live_.count(id) != 0;
}

void ConnectionFront::drain() {
  draining_.store(true);
  if (wake_[1] >= 0) (void)!write(wake_[1], "d", 1);
}

void ConnectionFront::stop() {
  stopping_.store(true);
  if (wake_[1] >= 0) (void)!write(wake_[1], "s", 1);
}

void ConnectionFront::run() {
  // What each pollfd stands for: the wake pipe, the listener, or a
  // connection's client or upstream socket.
  struct Slot {
    uint64_t id;
    bool upstream;
  };
  std::vector<pollfd> fds;
  std::vector<Slot> slots;
  while (!stopping_.load()) {
    if (draining_.load()) close_fd(listener_);
    const Clock::time_point now = Clock::now();
    fds.clear();
    slots.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    const bool listening = listener_ >= 0 && now >= accept_paused_until_;
    fds.push_back({listening ? listener_ : -1, POLLIN, 0});
    for (auto &entry : connections_) {
      Connection &c = *entry.second;
      const bool pending_out = c.client_sent < c.to_client.size();
      short client_events = pending_out ? POLLOUT : 0;
      if (c.phase != Connection::Phase::kReplying) client_events |= POLLIN;
      fds.push_back({c.client, client_events, 0});
      slots.push_back({c.id, false});
      if (c.upstream >= 0) {
        short events = 0;
        if (!c.upstream_connected || c.upstream_sent < c.to_upstream.size()) events |= POLLOUT;
        if (c.upstream_connected && c.to_client.size() - c.client_sent < kRelayBuffer)
          events |= POLLIN;
        fds.push_back({c.upstream, events, 0});
        slots.push_back({c.id, true});
      }
    }
    const int ready = poll(fds.data(), fds.size(), poll_timeout_ms(now));
    if (ready < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) {
      char sink[64];
      while (read(wake_[0], sink, sizeof sink) > 0) {
      }
    }
    if (fds[1].revents != 0) accept_clients();
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const Slot &slot = slots[i - 2];
      auto it = connections_.find(slot.id);
      if (it == connections_.end()) continue;  // closed earlier in this pass
      if (slot.upstream) {
        if (it->second->upstream >= 0) on_upstream_ready(*it->second, fds[i].revents);
      } else {
        on_client_event(*it->second, fds[i].revents);
      }
    }
    expire(Clock::now());
  }
  std::vector<uint64_t> ids;
  for (auto &entry : connections_) ids.push_back(entry.first);
  for (const uint64_t id : ids) close_connection(id);
  close_fd(listener_);
}

void ConnectionFront::accept_clients() {
  for (size_t i = 0; i < kAcceptBurst; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd =
        accept4(listener_, reinterpret_cast<sockaddr *>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        accept_paused_until_ = Clock::now() + kAcceptPause;  // poll would wake at once again
      return;
    }
    std::string address = peer_address(addr);
    size_t &from_client = per_client_[address];
    if (connections_.size() >= limits_.max_connections + kHardConnectionSlack) {
      ::close(fd);
      if (from_client == 0) per_client_.erase(address);
      continue;
    }
    set_nodelay(fd);
    const uint64_t id = next_id_++;
    ++from_client;
    auto c = std::make_unique<Connection>(id, fd, address, limits_.head);
    c->deadline = Clock::now() + limits_.request_deadline;
    Connection &ref = *c;
    connections_.emplace(id, std::move(c));
    if (connections_.size() > limits_.max_connections)
      reply(ref, 503, "Service Unavailable", "too many open connections; retry later");
    else if (from_client > limits_.max_per_client)
      reply(ref, 503, "Service Unavailable",
            "too many open connections from this address; retry later");
  }
}

void ConnectionFront::on_client_event(Connection &c, short revents) {
  if ((revents & POLLOUT) != 0 && !flush_client(c)) return;
  if ((revents & (POLLIN | POLLHUP | POLLERR)) == 0) return;
  if (c.phase == Connection::Phase::kRequest) {
    on_client_readable(c);
    return;
  }
  // After the request: anything more is read and dropped, an end of stream
  // means the client left (for a forwarded request: alive() turns false).
  char piece[kReadPiece];
  for (;;) {
    const ssize_t n = recv(c.client, piece, sizeof piece, 0);
    if (n > 0) {
      c.discarded += static_cast<size_t>(n);
      if (c.discarded > kMaxDiscarded) break;
      continue;
    }
    if (n < 0 && would_block()) return;
    break;
  }
  close_connection(c.id);
}

void ConnectionFront::on_client_readable(Connection &c) {
  char piece[kReadPiece];
  const ssize_t n = recv(c.client, piece, sizeof piece, 0);
  if (n < 0 && would_block()) return;
  if (n <= 0) {  // gone before its request was whole
    close_connection(c.id);
    return;
  }
  if (buffered_bytes_ + static_cast<uint64_t>(n) > limits_.max_buffered_bytes) {
    reply(c, 503, "Service Unavailable", "the server is reading too many requests; retry later");
    return;
  }
  buffered_bytes_ += static_cast<uint64_t>(n);
  c.budget += static_cast<uint64_t>(n);
  c.request.append(piece, static_cast<size_t>(n));
  if (!c.head_done && !take_head(c)) return;
  if (!take_body(c)) return;
  c.to_client.clear();  // a 100 Continue not yet sent is no longer wanted
  c.client_sent = 0;
  on_request_complete(c);
}

bool ConnectionFront::take_head(Connection &c) {
  switch (c.head_reader.feed(c.request)) {
    case HeadStatus::kIncomplete:
      return false;
    case HeadStatus::kTooLarge:
      reply(c, 431, "Request Header Fields Too Large",
            "the request head is over " + std::to_string(limits_.head.max_bytes >> 10) +
                " KiB or " + std::to_string(limits_.head.max_fields) + " header fields");
      return false;
    case HeadStatus::kBad:
      reply(c, 400, "Bad Request", "malformed request: " + c.head_reader.error());
      return false;
    case HeadStatus::kComplete:
      break;
  }
  c.head_done = true;
  const RequestHead &head = c.head_reader.head();
  if (head.chunked) {
    c.chunks = std::make_unique<ChunkedBodyScanner>(limits_.max_body_bytes);
  } else if (head.content_length > limits_.max_body_bytes) {
    reply(
        c, 413, "Payload Too Large",
        "the request body is larger than " + std::to_string(limits_.max_body_bytes >> 20) + " MiB");
    return false;
  }
  const bool body_expected = head.chunked || head.content_length > 0;
  if (head.expect_continue && body_expected && c.request.size() == c.head_reader.head_bytes())
    c.to_client = "HTTP/1.1 100 Continue\r\n\r\n";
  return true;
}

bool ConnectionFront::take_body(Connection &c) {
  const size_t body_start = c.head_reader.head_bytes();
  if (c.chunks) {
    switch (c.chunks->feed(c.request, body_start)) {
      case ChunkedBodyScanner::Status::kMore:
        flush_client(c);
        return false;
      case ChunkedBodyScanner::Status::kTooLarge:
        reply(c, 413, "Payload Too Large",
              "the request body is larger than " + std::to_string(limits_.max_body_bytes >> 20) +
                  " MiB");
        return false;
      case ChunkedBodyScanner::Status::kBad:
        reply(c, 400, "Bad Request", "malformed chunked request body");
        return false;
      case ChunkedBodyScanner::Status::kDone:
        c.request.resize(c.chunks->end());  // pipelined bytes after it are dropped
        return true;
    }
  }
  const uint64_t end = body_start + c.head_reader.head().content_length;
  if (c.request.size() < end) {
    flush_client(c);
    return false;
  }
  c.request.resize(static_cast<size_t>(end));
  return true;
}

void ConnectionFront::on_request_complete(Connection &c) {
  const RequestHead &head = c.head_reader.head();
  const std::string path = head.target.substr(0, head.target.find('?'));
  if (draining_.load()) {
    reply(c, 503, "Service Unavailable", "the server is shutting down");
    return;
  }
  if (head.method == "GET" && path == "/health") {  // answered while every worker is busy
    reply(c, 200, "OK", "");
    return;
  }
  // The head again, with our connection header instead of the client's
  // connection management: httplib answers one request and closes.
  std::string &out = c.to_upstream;
  out = head.method + " " + head.target + " " + head.version + "\r\n";
  for (const auto &field : head.fields)
    if (!hop_by_hop_or_ours(field.first)) out += field.first + ": " + field.second + "\r\n";
  out += "Connection: close\r\n";
  out += std::string(kFrontConnectionHeader) + ": " + std::to_string(c.id) + "\r\n\r\n";
  out.append(c.request, c.head_reader.head_bytes(), std::string::npos);
  buffered_bytes_ -= c.budget;  // the request's bytes now sit in to_upstream, on their way
  c.budget = 0;
  std::string().swap(c.request);
  start_upstream(c);
}

void ConnectionFront::start_upstream(Connection &c) {
  c.phase = Connection::Phase::kUpstream;
  c.forwarded = true;
  ++in_flight_;
  {
    std::lock_guard<std::mutex> lock(live_mutex_);
    live_.insert(c.id);
  }
  c.upstream = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(upstream_port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (c.upstream < 0 ||
      (connect(c.upstream, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 &&
       errno != EINPROGRESS)) {
    close_fd(c.upstream);
    reply(c, 502, "Bad Gateway", "the server's workers cannot be reached");
    return;
  }
  set_nodelay(c.upstream);
}

void ConnectionFront::on_upstream_ready(Connection &c, short revents) {
  if (!c.upstream_connected) {
    int error = 0;
    socklen_t len = sizeof error;
    if (getsockopt(c.upstream, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0) {
      close_fd(c.upstream);
      reply(c, 502, "Bad Gateway", "the server's workers cannot be reached");
      return;
    }
    if ((revents & (POLLOUT | POLLERR | POLLHUP)) == 0) return;
    c.upstream_connected = true;
  }
  // Hung up: whatever it answered follows below.
  if (!send_pending(c.upstream, c.to_upstream, &c.upstream_sent)) c.upstream_done = true;
  if (c.upstream_sent == c.to_upstream.size() && !c.to_upstream.empty()) {
    std::string().swap(c.to_upstream);
    c.upstream_sent = 0;
  }
  if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0 || c.upstream_done) {
    if (c.client_sent == c.to_client.size()) {
      c.to_client.clear();
      c.client_sent = 0;
    }
    char piece[kReadPiece];
    while (c.to_client.size() - c.client_sent < kRelayBuffer) {
      const ssize_t n = recv(c.upstream, piece, sizeof piece, 0);
      if (n > 0) {
        c.to_client.append(piece, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && would_block()) break;
      c.upstream_done = true;
      break;
    }
  }
  if (c.upstream_done) close_fd(c.upstream);
  flush_client(c);
}

bool ConnectionFront::flush_client(Connection &c) {
  if (!send_pending(c.client, c.to_client, &c.client_sent)) {
    close_connection(c.id);  // the client is gone
    return false;
  }
  if (c.client_sent < c.to_client.size()) return true;  // the rest when it can take it
  const bool answered = c.phase == Connection::Phase::kReplying ||
                        (c.phase == Connection::Phase::kUpstream && c.upstream_done);
  if (answered) linger(c);
  return true;
}

void ConnectionFront::linger(Connection &c) {
  shutdown(c.client, SHUT_WR);
  c.phase = Connection::Phase::kLingering;
  c.deadline = Clock::now() + kLingerTime;
  if (c.forwarded) {  // the answer is out: the request no longer counts
    c.forwarded = false;
    --in_flight_;
    std::lock_guard<std::mutex> lock(live_mutex_);
    live_.erase(c.id);
  }
}

void ConnectionFront::reply(Connection &c, int status, const char *reason,
                            const std::string &message) {
  const std::string body = status == 200 ? std::string("{\"status\":\"ok\"}")
                                         : dump_json(ApiError(status, "", message).to_json());
  c.to_client =
      "HTTP/1.1 " + std::to_string(status) + " " + reason +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n\r\n" + body;
  c.client_sent = 0;
  c.phase = Connection::Phase::kReplying;
  c.deadline = Clock::now() + kReplyDeadline;
  buffered_bytes_ -= c.budget;
  c.budget = 0;
  std::string().swap(c.request);
  flush_client(c);
}

void ConnectionFront::close_connection(uint64_t id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection &c = *it->second;
  close_fd(c.client);
  close_fd(c.upstream);
  buffered_bytes_ -= c.budget;
  if (c.forwarded) {
    --in_flight_;
    std::lock_guard<std::mutex> lock(live_mutex_);
    live_.erase(id);
  }
  auto count = per_client_.find(c.address);
  if (count != per_client_.end() && --count->second == 0) per_client_.erase(count);
  connections_.erase(it);
}

void ConnectionFront::expire(Clock::time_point now) {
  std::vector<uint64_t> late;
  for (auto &entry : connections_)
    if (entry.second->phase != Connection::Phase::kUpstream && now >= entry.second->deadline)
      late.push_back(entry.first);
  for (const uint64_t id : late) {
    Connection &c = *connections_.at(id);
    if (c.phase == Connection::Phase::kRequest)
      reply(c, 408, "Request Timeout",
            "the request did not arrive within " +
                std::to_string(limits_.request_deadline.count() / 1000) + " s");
    else
      close_connection(id);
  }
}

int ConnectionFront::poll_timeout_ms(Clock::time_point now) const {
  auto next = now + std::chrono::seconds(1);
  for (const auto &entry : connections_)
    if (entry.second->phase != Connection::Phase::kUpstream)
      next = std::min(next, entry.second->deadline);
  if (listener_ >= 0 && accept_paused_until_ > now) next = std::min(next, accept_paused_until_);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
  return static_cast<int>(std::max<int64_t>(ms + 1, 0));
}

}  // namespace vegas_server
