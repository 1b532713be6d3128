// The tokenizer section of vegas.h over vegas::Tokenizer.
#include <string>
#include <vector>

#include "api/api_guard.h"
#include "api/api_handles.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_tokenizer.h"
#include "tokenizer/chat_format.h"

using vegas::api::guarded;
using vegas::api::require_non_null;
using vegas::api::write_buffer;

namespace {

const vegas::Tokenizer &tokenizer_of(const vegas_tokenizer *t) {
  require_non_null(t, "tokenizer");
  if (t->impl == nullptr) vegas::fail(VEGAS_ERR_INVALID_ARGUMENT, "tokenizer is not loaded");
  return *t->impl;
}

vegas::StreamingDetokenizer &detokenizer_of(vegas_detokenizer *d) {
  require_non_null(d, "detokenizer");
  return *d->impl;
}

}  // namespace

extern "C" {

VEGAS_API vegas_status vegas_tokenizer_load(const char *path, vegas_tokenizer **out) {
  return guarded([&] {
    require_non_null(path, "path");
    require_non_null(out, "out");
    auto handle = std::make_unique<vegas_tokenizer>();
    const std::string p = path;
    const bool gguf = p.size() > 5 && p.compare(p.size() - 5, 5, ".gguf") == 0;
    handle->owned = gguf ? vegas::gguf::tokenizer_from_gguf(*vegas::gguf::File::open(p))
                         : vegas::Tokenizer::load(p);
    handle->impl = handle->owned.get();
    *out = handle.release();
  });
}

VEGAS_API void vegas_tokenizer_free(vegas_tokenizer *tokenizer) {
  // A model's borrowed tokenizer lives inside its model handle and owns
  // nothing: freeing it is a no-op (it used to abort the host).
  if (tokenizer == nullptr || tokenizer->owned == nullptr) return;
  delete tokenizer;
}

VEGAS_API int32_t vegas_tokenizer_vocab_size(const vegas_tokenizer *tokenizer) {
  if (tokenizer == nullptr || tokenizer->impl == nullptr) return 0;
  return tokenizer->impl->vocab_size();
}

VEGAS_API void vegas_tokenize_options_init_sized(vegas_tokenize_options *options, size_t size) {
  vegas_tokenize_options o{};
  o.parse_special = 1;
  o.add_special = 1;
  vegas::abi::init_struct(o, options, size);
}

VEGAS_API vegas_status vegas_tokenize(const vegas_tokenizer *tokenizer, const char *text,
                                      size_t text_len, const vegas_tokenize_options *options,
                                      int32_t *ids, size_t capacity, size_t *n_ids) {
  return guarded([&] {
    const vegas::Tokenizer &tok = tokenizer_of(tokenizer);
    if (text_len > 0) require_non_null(text, "text");
    require_non_null(n_ids, "n_ids");
    vegas_tokenize_options opts;
    vegas_tokenize_options_init(&opts);
    vegas::api::read_options(options, &opts, "vegas_tokenize_options");
    const std::vector<int32_t> out =
        tok.encode(std::string_view(text == nullptr ? "" : text, text_len), opts.parse_special != 0,
                   opts.add_special != 0);
    write_buffer(out.data(), out.size(), ids, capacity, n_ids, "vegas_tokenize");
  });
}

VEGAS_API vegas_status vegas_detokenize(const vegas_tokenizer *tokenizer, const int32_t *ids,
                                        size_t n_ids, int32_t skip_special, char *text,
                                        size_t capacity, size_t *n_bytes) {
  return guarded([&] {
    const vegas::Tokenizer &tok = tokenizer_of(tokenizer);
    if (n_ids > 0) require_non_null(ids, "ids");
    require_non_null(n_bytes, "n_bytes");
    const std::string out = tok.decode(ids, n_ids, skip_special != 0);
    write_buffer(out.data(), out.size(), text, capacity, n_bytes, "vegas_detokenize");
  });
}

VEGAS_API vegas_status vegas_token_to_piece(const vegas_tokenizer *tokenizer, int32_t id,
                                            char *bytes, size_t capacity, size_t *n_bytes) {
  return guarded([&] {
    const std::string &piece = tokenizer_of(tokenizer).token_bytes(id);
    write_buffer(piece.data(), piece.size(), bytes, capacity, n_bytes, "vegas_token_to_piece");
  });
}

VEGAS_API vegas_status vegas_token_by_name(const vegas_tokenizer *tokenizer, const char *name,
                                           int32_t *id) {
  return guarded([&] {
    const vegas::Tokenizer &tok = tokenizer_of(tokenizer);
    require_non_null(name, "name");
    require_non_null(id, "id");
    const int32_t found = tok.find_token(name);
    if (found < 0) vegas::fail(VEGAS_ERR_NOT_FOUND, std::string("no token named \"") + name + "\"");
    *id = found;
  });
}

VEGAS_API int32_t vegas_token_is_special(const vegas_tokenizer *tokenizer, int32_t id) {
  if (tokenizer == nullptr || tokenizer->impl == nullptr) return 0;
  return tokenizer->impl->is_special(id) ? 1 : 0;
}

VEGAS_API vegas_status vegas_tokenizer_special_tokens(const vegas_tokenizer *tokenizer,
                                                      vegas_special_tokens *out) {
  return guarded([&] {
    const vegas::SpecialTokenIds &s = tokenizer_of(tokenizer).special_ids();
    require_non_null(out, "out");
    vegas::abi::check_struct_size(out->struct_size, "vegas_special_tokens");
    vegas_special_tokens full{};
    full.bos = s.bos;
    full.eos = s.eos;
    full.pad = s.pad;
    full.fim_prefix = s.fim_prefix;
    full.fim_middle = s.fim_middle;
    full.fim_suffix = s.fim_suffix;
    full.fim_pad = s.fim_pad;
    full.file_sep = s.file_sep;
    full.im_start = s.im_start;
    full.im_end = s.im_end;
    vegas::abi::write_struct(full, out, "vegas_special_tokens");
  });
}

VEGAS_API const char *vegas_tokenizer_chat_format(const vegas_tokenizer *tokenizer) {
  if (tokenizer == nullptr || tokenizer->impl == nullptr) return "";
  return vegas::chat_family_name(vegas::chat_family(*tokenizer->impl));
}

VEGAS_API vegas_status vegas_chat_tokenize(const vegas_tokenizer *tokenizer,
                                           const char *const *roles, const char *const *contents,
                                           size_t n_messages, int32_t add_generation_prompt,
                                           int32_t *ids, size_t capacity, size_t *n_ids) {
  return guarded([&] {
    const vegas::Tokenizer &tok = tokenizer_of(tokenizer);
    require_non_null(n_ids, "n_ids");
    if (n_messages > 0) {
      require_non_null(roles, "roles");
      require_non_null(contents, "contents");
    }
    std::vector<vegas::ChatMessageView> messages(n_messages);
    for (size_t i = 0; i < n_messages; ++i) {
      require_non_null(roles[i], "roles[i]");
      require_non_null(contents[i], "contents[i]");
      messages[i] = {roles[i], contents[i]};
    }
    const std::vector<int32_t> out =
        vegas::chat_tokenize(tok, messages, add_generation_prompt != 0);
    write_buffer(out.data(), out.size(), ids, capacity, n_ids, "vegas_chat_tokenize");
  });
}

VEGAS_API vegas_status vegas_detokenizer_create(const vegas_tokenizer *tokenizer,
                                                int32_t skip_special, vegas_detokenizer **out) {
  return guarded([&] {
    const vegas::Tokenizer &tok = tokenizer_of(tokenizer);
    require_non_null(out, "out");
    auto handle = std::make_unique<vegas_detokenizer>();
    handle->impl = std::make_unique<vegas::StreamingDetokenizer>(tok, skip_special != 0);
    *out = handle.release();
  });
}

VEGAS_API void vegas_detokenizer_free(vegas_detokenizer *detokenizer) {
  delete detokenizer;
}

VEGAS_API vegas_status vegas_detokenizer_push(vegas_detokenizer *detokenizer, int32_t id,
                                              char *text, size_t capacity, size_t *n_bytes) {
  return guarded([&] {
    vegas::StreamingDetokenizer &d = detokenizer_of(detokenizer);
    require_non_null(n_bytes, "n_bytes");
    // Check the buffer before consuming the token so a short buffer leaves the stream as it was.
    const std::string out = d.preview(id);
    write_buffer(out.data(), out.size(), text, capacity, n_bytes, "vegas_detokenizer_push");
    d.push(id);
  });
}

VEGAS_API vegas_status vegas_detokenizer_flush(vegas_detokenizer *detokenizer, char *text,
                                               size_t capacity, size_t *n_bytes) {
  return guarded([&] {
    vegas::StreamingDetokenizer &d = detokenizer_of(detokenizer);
    require_non_null(n_bytes, "n_bytes");
    const std::string out = d.pending_text();
    write_buffer(out.data(), out.size(), text, capacity, n_bytes, "vegas_detokenizer_flush");
    d.flush();
  });
}

}  // extern "C"
