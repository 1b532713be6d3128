// The head of an HTTP/1.1 request as the connection front reads it: enough to
// bound it, to find where its body ends and to forward it, no more (httplib,
// behind the front, parses it again for the handlers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace vegas_server {

struct RequestHead {
  std::string method, target, version;
  std::vector<std::pair<std::string, std::string>> fields;  // in order, names as sent
  bool chunked = false;                                     // Transfer-Encoding: chunked
  uint64_t content_length = 0;                              // when not chunked
  bool expect_continue = false;
};

struct HeadLimits {
  size_t max_bytes = size_t{64} << 10;  // the request line and every field, 431 beyond
  size_t max_fields = 100;              // header fields, 431 beyond
};

enum class HeadStatus { kIncomplete, kComplete, kTooLarge, kBad };

// Finds the head at the start of a request that arrives piece by piece: call
// feed() with the whole buffer each time bytes were added. It scans only the
// new bytes, so a client that drips its head costs linear time.
class HeadReader {
 public:
  explicit HeadReader(HeadLimits limits) : limits_(limits) {}

  HeadStatus feed(const std::string &buffer);
  const RequestHead &head() const { return head_; }
  size_t head_bytes() const { return end_; }  // where the body starts (kComplete)
  const std::string &error() const { return error_; }

 private:
  HeadStatus parse(const std::string &buffer);

  HeadLimits limits_;
  size_t scanned_ = 0;  // bytes of the buffer already searched for the end
  size_t lines_ = 0;    // line feeds seen so far
  size_t end_ = 0;
  RequestHead head_;
  std::string error_;
};

// Where a chunked body ends (RFC 9112 §7.1), bytes arriving piece by piece.
// The decoded size is bounded; so are chunk-size and trailer lines.
class ChunkedBodyScanner {
 public:
  explicit ChunkedBodyScanner(uint64_t max_decoded) : max_decoded_(max_decoded) {}

  enum class Status { kMore, kDone, kTooLarge, kBad };
  // body: the bytes after the head received so far (always the same prefix plus more).
  Status feed(const std::string &buffer, size_t body_start);
  size_t end() const { return pos_; }  // offset in the buffer past the body (kDone)

 private:
  enum class State { kSizeLine, kData, kDataEnd, kTrailer, kDone };
  State state_ = State::kSizeLine;
  size_t pos_ = 0;  // 0 = not started
  uint64_t remaining_ = 0;
  uint64_t decoded_ = 0;
  uint64_t max_decoded_;
  size_t trailer_lines_ = 0;
};

// "Name: value" header field lookup, names compared without case.
bool field_name_is(const std::string &name, const char *lowercase);

}  // namespace vegas_server
