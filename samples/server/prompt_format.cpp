#include "prompt_format.h"

#include "api_error.h"

namespace vegas_server {

PromptFormat::PromptFormat(const vegas_tokenizer *tokenizer) : tokenizer_(tokenizer) {
  special_.struct_size = sizeof(special_);
  if (vegas_tokenizer_special_tokens(tokenizer_, &special_) != VEGAS_OK) {
    special_ = vegas_special_tokens{};
    special_.struct_size = sizeof(special_);
    special_.bos = special_.eos = special_.pad = special_.fim_prefix = special_.fim_middle =
        special_.fim_suffix = special_.fim_pad = special_.file_sep = special_.im_start =
            special_.im_end = -1;
  }
  chat_format_ = vegas_tokenizer_chat_format(tokenizer_);
}

int32_t PromptFormat::token(const char *name) const {
  int32_t id = -1;
  return vegas_token_by_name(tokenizer_, name, &id) == VEGAS_OK ? id : -1;
}

namespace {

// Appends the ids of `text` to *ids, growing the buffer when the library asks for more.
void tokenize_into(const vegas_tokenizer *tokenizer, const std::string &text,
                   const vegas_tokenize_options &o, std::vector<int32_t> *ids) {
  const size_t at = ids->size();
  size_t capacity = text.size() + 8;
  for (int attempt = 0; attempt < 2; ++attempt) {
    ids->resize(at + capacity);
    size_t n = 0;
    const vegas_status st =
        vegas_tokenize(tokenizer, text.data(), text.size(), &o, ids->data() + at, capacity, &n);
    if (st == VEGAS_OK) {
      ids->resize(at + n);
      return;
    }
    if (st != VEGAS_ERR_BUFFER_TOO_SMALL) break;
    capacity = n;
  }
  ids->resize(at);
  throw ApiError(500, "", std::string("tokenizing failed: ") + vegas_last_error());
}

// Bytes from a library call that reports the size it needs when the buffer
// is too small: a first guess, then exactly that size.
template <typename Fill>
std::string read_bytes(size_t guess, const char *what, Fill fill) {
  std::string bytes(guess, '\0');
  for (int attempt = 0; attempt < 2; ++attempt) {
    size_t n = 0;
    const vegas_status st = fill(bytes.data(), bytes.size(), &n);
    if (st == VEGAS_OK) {
      bytes.resize(n);
      return bytes;
    }
    if (st != VEGAS_ERR_BUFFER_TOO_SMALL) break;
    bytes.resize(n);
  }
  throw ApiError(500, "", std::string(what) + " failed: " + vegas_last_error());
}

}  // namespace

void PromptFormat::append_text(std::vector<int32_t> *ids, const std::string &text,
                               bool parse_special) const {
  if (text.empty()) return;
  vegas_tokenize_options o;
  vegas_tokenize_options_init(&o);
  o.parse_special = parse_special ? 1 : 0;
  o.add_special = 0;
  tokenize_into(tokenizer_, text, o, ids);
}

std::vector<int32_t> PromptFormat::plain(const std::string &text) const {
  std::vector<int32_t> ids;
  vegas_tokenize_options o;
  vegas_tokenize_options_init(&o);  // parse_special and add_special on, as `vegas generate`
  tokenize_into(tokenizer_, text, o, &ids);
  return ids;
}

std::vector<int32_t> PromptFormat::tokenize(const std::string &text, bool add_special,
                                            bool parse_special) const {
  std::vector<int32_t> ids;
  vegas_tokenize_options o;
  vegas_tokenize_options_init(&o);
  o.parse_special = parse_special ? 1 : 0;
  o.add_special = add_special ? 1 : 0;
  tokenize_into(tokenizer_, text, o, &ids);
  return ids;
}

std::string PromptFormat::detokenize(const std::vector<int32_t> &ids) const {
  return read_bytes(ids.size() * 8 + 16, "detokenizing", [&](char *out, size_t cap, size_t *n) {
    return vegas_detokenize(tokenizer_, ids.data(), ids.size(), 0, out, cap, n);
  });
}

std::string PromptFormat::piece(int32_t id) const {
  return read_bytes(64, "a token's piece", [&](char *out, size_t cap, size_t *n) {
    return vegas_token_to_piece(tokenizer_, id, out, cap, n);
  });
}

std::vector<int32_t> PromptFormat::chat(const std::vector<ChatMessage> &messages) const {
  if (!has_chat())
    throw ApiError::bad_field("messages",
                              "messages: the model has no chat format libvegas recognizes (its "
                              "chat template is not ChatML or Llama 3); use /v1/completions");
  std::vector<const char *> roles, contents;
  for (const ChatMessage &m : messages) {
    roles.push_back(m.role.c_str());
    contents.push_back(m.content.c_str());
  }
  size_t capacity = 16;
  for (const ChatMessage &m : messages) capacity += m.role.size() + m.content.size() + 8;
  std::vector<int32_t> ids;
  for (int attempt = 0; attempt < 2; ++attempt) {
    ids.resize(capacity);
    size_t n = 0;
    const vegas_status st = vegas_chat_tokenize(tokenizer_, roles.data(), contents.data(),
                                                messages.size(), 1, ids.data(), capacity, &n);
    if (st == VEGAS_OK) {
      ids.resize(n);
      return ids;
    }
    if (st != VEGAS_ERR_BUFFER_TOO_SMALL) break;
    capacity = n;
  }
  throw ApiError(500, "", std::string("chat formatting failed: ") + vegas_last_error());
}

std::vector<int32_t> PromptFormat::infill(const std::string &prefix, const std::string &suffix,
                                          const std::vector<InfillFile> &extra,
                                          const std::string &prompt) const {
  if (!has_fim())
    throw ApiError::bad_field("input_prefix",
                              "input_prefix: the model's tokenizer has no fill-in-the-middle "
                              "tokens (<|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>)");
  if (!extra.empty() && special_.file_sep < 0)
    throw ApiError::bad_field("input_extra",
                              "input_extra: the model's tokenizer has no <|file_sep|> token");
  std::vector<int32_t> ids;
  for (const InfillFile &f : extra) {
    ids.push_back(special_.file_sep);
    std::string text = f.filename + "\n" + f.text;
    if (!text.empty() && text.back() != '\n') text += '\n';
    append_text(&ids, text, false);
  }
  ids.push_back(special_.fim_prefix);
  append_text(&ids, prefix, false);
  ids.push_back(special_.fim_suffix);
  append_text(&ids, suffix, false);
  ids.push_back(special_.fim_middle);
  append_text(&ids, prompt, false);
  return ids;
}

std::vector<int32_t> PromptFormat::chat_stop_ids() const {
  std::vector<int32_t> ids;
  const bool llama3 = chat_format_ == "llama3";
  for (const char *name :
       {llama3 ? "<|eot_id|>" : "<|im_end|>", llama3 ? "<|start_header_id|>" : "<|im_start|>"}) {
    const int32_t id = token(name);
    if (id >= 0) ids.push_back(id);
  }
  return ids;
}

std::vector<int32_t> PromptFormat::infill_stop_ids() const {
  std::vector<int32_t> ids;
  for (int32_t t : {special_.fim_prefix, special_.fim_suffix, special_.fim_middle, special_.fim_pad,
                    special_.file_sep})
    if (t >= 0) ids.push_back(t);
  return ids;
}

}  // namespace vegas_server
