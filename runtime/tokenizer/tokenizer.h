// Hugging Face tokenizer.json (byte-level BPE) with exact parity to the
// `tokenizers` library: normalizer, pre-tokenizer, BPE model, added tokens,
// ByteLevel decoder.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace vegas {

struct SpecialTokenIds {
  int32_t bos = -1, eos = -1, pad = -1;
  int32_t fim_prefix = -1, fim_middle = -1, fim_suffix = -1, fim_pad = -1;
  int32_t file_sep = -1, im_start = -1, im_end = -1;
};

class Tokenizer {
 public:
  // `path`: tokenizer.json, or a directory holding it (and optionally
  // tokenizer_config.json). Throws vegas::Error: IO, FORMAT (what is wrong),
  // UNSUPPORTED (names the type).
  static std::unique_ptr<Tokenizer> load(const std::string &path);
  // From in-memory JSON texts (config_json may be empty). For tests and fuzzers.
  static std::unique_ptr<Tokenizer> from_json(const std::string &tokenizer_json,
                                              const std::string &config_json);
  virtual ~Tokenizer() = default;

  // Invalid UTF-8 becomes U+FFFD. Thread-safe (the word cache is internally locked).
  virtual std::vector<int32_t> encode(std::string_view text, bool parse_special,
                                      bool add_special) const = 0;
  // Throws TOKEN_OUT_OF_RANGE. Invalid UTF-8 in the result becomes U+FFFD.
  virtual std::string decode(const int32_t *ids, size_t n, bool skip_special) const = 0;
  // The raw bytes of one token (ByteLevel-decoded), no UTF-8 repair.
  virtual const std::string &token_bytes(int32_t id) const = 0;
  virtual int32_t vocab_size() const = 0;
  // -1 when absent. Looks up added tokens and vocabulary entries by their text.
  virtual int32_t find_token(std::string_view text) const = 0;
  virtual bool is_special(int32_t id) const = 0;
  virtual const SpecialTokenIds &special_ids() const = 0;
  // tokenizer_config.json's chat_template (Jinja source; the "default" one of
  // a list), or "" when it has none.
  virtual const std::string &chat_template() const = 0;
  // Empties the word cache (benchmarks measure the cold path with it).
  virtual void clear_cache() const {}
};

// Turns a stream of token ids into complete UTF-8 text.
class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer &tokenizer, bool skip_special);
  // Throws TOKEN_OUT_OF_RANGE. Returns the text completed by this token.
  std::string push(int32_t id);
  // The text push(id) would return, without changing the state (lets the C
  // API report a short buffer and leave the stream untouched).
  std::string preview(int32_t id) const;
  // Pending incomplete bytes as U+FFFD; resets.
  std::string flush();
  // Pending bytes without consuming them, as flush() would return them.
  std::string pending_text() const;

 private:
  std::string peek(int32_t id, size_t *keep) const;

  const Tokenizer &tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace vegas
