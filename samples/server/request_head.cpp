#include "request_head.h"

#include <cctype>
#include <cstring>

namespace vegas_server {

namespace {

constexpr size_t kMaxChunkSizeLine = 1024;
constexpr size_t kMaxTrailerLine = 8192;
constexpr size_t kMaxTrailerLines = 100;

std::string trim(const std::string &s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

std::string lowercase(std::string s) {
  for (char &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// RFC 9110 token characters (method and field names).
bool is_token(const std::string &s) {
  if (s.empty()) return false;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr) continue;
    return false;
  }
  return true;
}

// The line [from, newline) without its CR.
std::string line_at(const std::string &buffer, size_t from, size_t newline) {
  size_t end = newline;
  if (end > from && buffer[end - 1] == '\r') --end;
  return buffer.substr(from, end - from);
}

}  // namespace

bool field_name_is(const std::string &name, const char *lowercase_name) {
  const size_t n = std::strlen(lowercase_name);
  if (name.size() != n) return false;
  for (size_t i = 0; i < n; ++i)
    if (std::tolower(static_cast<unsigned char>(name[i])) != lowercase_name[i]) return false;
  return true;
}

HeadStatus HeadReader::feed(const std::string &buffer) {
  for (size_t i = scanned_; i < buffer.size(); ++i) {
    if (buffer[i] != '\n') continue;
    ++lines_;
    // An empty line (LF or CR LF alone) after at least the request line ends the head.
    const bool empty = (i >= 1 && buffer[i - 1] == '\n') ||
                       (i >= 2 && buffer[i - 1] == '\r' && buffer[i - 2] == '\n');
    if (empty) {
      end_ = i + 1;
      if (end_ > limits_.max_bytes) return HeadStatus::kTooLarge;
      return parse(buffer);
    }
    if (lines_ > limits_.max_fields + 1) return HeadStatus::kTooLarge;
  }
  scanned_ = buffer.size();
  if (buffer.size() > limits_.max_bytes) return HeadStatus::kTooLarge;
  return HeadStatus::kIncomplete;
}

HeadStatus HeadReader::parse(const std::string &buffer) {
  auto bad = [this](const char *why) {
    error_ = why;
    return HeadStatus::kBad;
  };
  size_t from = 0;
  size_t newline = buffer.find('\n', from);
  const std::string request_line = line_at(buffer, from, newline);
  const size_t sp1 = request_line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : request_line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || request_line.find(' ', sp2 + 1) != std::string::npos)
    return bad("malformed request line");
  head_.method = request_line.substr(0, sp1);
  head_.target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  head_.version = request_line.substr(sp2 + 1);
  if (!is_token(head_.method) || head_.target.empty()) return bad("malformed request line");
  if (head_.version != "HTTP/1.1" && head_.version != "HTTP/1.0")
    return bad("unsupported HTTP version");

  bool have_length = false;
  for (from = newline + 1; from < end_; from = newline + 1) {
    newline = buffer.find('\n', from);
    const std::string line = line_at(buffer, from, newline);
    if (line.empty()) break;
    const size_t colon = line.find(':');
    if (colon == std::string::npos || !is_token(line.substr(0, colon)))
      return bad("malformed header field");  // also obsolete line folding
    std::string name = line.substr(0, colon), value = trim(line.substr(colon + 1));
    if (field_name_is(name, "content-length")) {
      if (value.empty() || value.size() > 15 ||
          value.find_first_not_of("0123456789") != std::string::npos)
        return bad("invalid Content-Length");
      const uint64_t n = std::stoull(value);
      if (have_length && n != head_.content_length) return bad("conflicting Content-Length");
      head_.content_length = n;
      have_length = true;
    } else if (field_name_is(name, "transfer-encoding")) {
      if (lowercase(value) != "chunked") return bad("unsupported Transfer-Encoding");
      head_.chunked = true;
    } else if (field_name_is(name, "expect")) {
      head_.expect_continue = lowercase(value) == "100-continue";
    }
    head_.fields.emplace_back(std::move(name), std::move(value));
  }
  // Both framings at once is how requests are smuggled past a front (RFC 9112 §6.1).
  if (have_length && head_.chunked) return bad("both Content-Length and Transfer-Encoding");
  return HeadStatus::kComplete;
}

ChunkedBodyScanner::Status ChunkedBodyScanner::feed(const std::string &buffer, size_t body_start) {
  if (pos_ == 0) pos_ = body_start;
  while (pos_ <= buffer.size()) {
    const size_t avail = buffer.size() - pos_;
    switch (state_) {
      case State::kSizeLine: {
        const size_t newline = buffer.find('\n', pos_);
        if (newline == std::string::npos)
          return avail > kMaxChunkSizeLine ? Status::kBad : Status::kMore;
        const std::string line = line_at(buffer, pos_, newline);
        size_t digits = 0;
        uint64_t size = 0;
        while (digits < line.size() && std::isxdigit(static_cast<unsigned char>(line[digits]))) {
          if (digits == 15) return Status::kTooLarge;
          const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(line[digits])));
          size = size * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
          ++digits;
        }
        const std::string rest = trim(line.substr(digits));
        if (digits == 0 || (!rest.empty() && rest[0] != ';')) return Status::kBad;
        pos_ = newline + 1;
        if (size == 0) {
          state_ = State::kTrailer;
          break;
        }
        decoded_ += size;
        if (decoded_ > max_decoded_) return Status::kTooLarge;
        remaining_ = size;
        state_ = State::kData;
        break;
      }
      case State::kData: {
        const uint64_t take = remaining_ < avail ? remaining_ : avail;
        pos_ += static_cast<size_t>(take);
        remaining_ -= take;
        if (remaining_ > 0) return Status::kMore;
        state_ = State::kDataEnd;
        break;
      }
      case State::kDataEnd:
        if (avail >= 1 && buffer[pos_] == '\n') {
          pos_ += 1;
        } else if (avail >= 2 && buffer[pos_] == '\r' && buffer[pos_ + 1] == '\n') {
          pos_ += 2;
        } else if (avail < 2 && (avail == 0 || buffer[pos_] == '\r')) {
          return Status::kMore;
        } else {
          return Status::kBad;
        }
        state_ = State::kSizeLine;
        break;
      case State::kTrailer: {
        const size_t newline = buffer.find('\n', pos_);
        if (newline == std::string::npos)
          return avail > kMaxTrailerLine ? Status::kBad : Status::kMore;
        const bool empty = line_at(buffer, pos_, newline).empty();
        pos_ = newline + 1;
        if (empty) {
          state_ = State::kDone;
          return Status::kDone;
        }
        if (++trailer_lines_ > kMaxTrailerLines) return Status::kBad;
        break;
      }
      case State::kDone:
        return Status::kDone;
    }
  }
  return Status::kMore;
}

}  // namespace vegas_server
