#include "common/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace vegas {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer &tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string StreamingDetokenizer::peek(int32_t id, size_t *keep) const {
  const std::string &piece = tokenizer_.token_bytes(id);  // throws TOKEN_OUT_OF_RANGE
  std::string bytes = pending_;
  if (!(skip_special_ && tokenizer_.is_special(id))) bytes += piece;
  // Hold back only a character still being completed; anything that can no
  // longer become valid goes out now as U+FFFD, so the stream's text equals
  // Tokenizer::decode of all its ids.
  *keep = utf8::incomplete_tail(bytes);
  return bytes;
}

std::string StreamingDetokenizer::push(int32_t id) {
  size_t keep = 0;
  std::string bytes = peek(id, &keep);
  std::string text = utf8::lossy(std::string_view(bytes).substr(0, bytes.size() - keep));
  pending_ = bytes.substr(bytes.size() - keep);
  return text;
}

std::string StreamingDetokenizer::preview(int32_t id) const {
  size_t keep = 0;
  const std::string bytes = peek(id, &keep);
  return utf8::lossy(std::string_view(bytes).substr(0, bytes.size() - keep));
}

std::string StreamingDetokenizer::pending_text() const {
  return utf8::lossy(pending_);
}

std::string StreamingDetokenizer::flush() {
  std::string text = utf8::lossy(pending_);
  pending_.clear();
  return text;
}

}  // namespace vegas
