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

// The output of a library call that reports the size it needs when the
// buffer is too small (bytes into a std::string, ids into a vector): a first
// guess, then exactly that size.
template <typename Buffer, typename Fill>
Buffer read_buffer(size_t guess, const char *what, Fill fill) {
  Buffer out(guess, typename Buffer::value_type{});
  for (int attempt = 0; attempt < 2; ++attempt) {
    size_t n = 0;
    const vegas_status st = fill(out.data(), out.size(), &n);
    if (st == VEGAS_OK) {
      out.resize(n);
      return out;
    }
    if (st != VEGAS_ERR_BUFFER_TOO_SMALL) break;
    out.resize(n);
  }
  throw ApiError(500, "", std::string(what) + " failed: " + vegas_last_error());
}

// Appends the ids of `text` to *ids.
void tokenize_into(const vegas_tokenizer *tokenizer, const std::string &text,
                   const vegas_tokenize_options &o, std::vector<int32_t> *ids) {
  const auto got = read_buffer<std::vector<int32_t>>(
      text.size() + 8, "tokenizing", [&](int32_t *out, size_t capacity, size_t *n) {
        return vegas_tokenize(tokenizer, text.data(), text.size(), &o, out, capacity, n);
      });
  ids->insert(ids->end(), got.begin(), got.end());
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
  return read_buffer<std::string>(
      ids.size() * 8 + 16, "detokenizing", [&](char *out, size_t cap, size_t *n) {
        return vegas_detokenize(tokenizer_, ids.data(), ids.size(), 0, out, cap, n);
      });
}

std::string PromptFormat::piece(int32_t id) const {
  return read_buffer<std::string>(64, "a token's piece", [&](char *out, size_t cap, size_t *n) {
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
  size_t guess = 16;
  for (const ChatMessage &m : messages) guess += m.role.size() + m.content.size() + 8;
  return read_buffer<std::vector<int32_t>>(
      guess, "chat formatting", [&](int32_t *out, size_t capacity, size_t *n) {
        return vegas_chat_tokenize(tokenizer_, roles.data(), contents.data(), messages.size(), 1,
                                   out, capacity, n);
      });
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
