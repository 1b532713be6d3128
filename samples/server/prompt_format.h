// Turns requests into prompt token ids with the model's own tokens: plain text,
// chat messages in the model's chat format (vegas_chat_tokenize: ChatML or
// Llama 3, recognized from its chat template) and fill-in-the-middle (when it
// has the FIM tokens). Text from the client is tokenized with
// special-token parsing off, so a message cannot forge a role or FIM marker.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vegas.h"

namespace vegas_server {

struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

struct InfillFile {
  std::string filename;
  std::string text;
};

class PromptFormat {
 public:
  explicit PromptFormat(const vegas_tokenizer *tokenizer);

  // Raw completion prompt: special tokens written in the text are parsed (as the CLI does).
  std::vector<int32_t> plain(const std::string &text) const;
  // /tokenize: the text's ids, special tokens in it parsed or not, bos added
  // or not (when the tokenizer adds one at all).
  std::vector<int32_t> tokenize(const std::string &text, bool add_special,
                                bool parse_special) const;
  // /detokenize: the ids' text (invalid UTF-8 as U+FFFD); ids must be valid.
  std::string detokenize(const std::vector<int32_t> &ids) const;
  // The raw bytes one token stands for.
  std::string piece(int32_t id) const;
  // Throws ApiError (param "messages") when the model has no chat template.
  std::vector<int32_t> chat(const std::vector<ChatMessage> &messages) const;
  // <|file_sep|>name\ntext per extra file, then <|fim_prefix|>P<|fim_suffix|>S<|fim_middle|>,
  // then `prompt` (text the middle starts with). Throws ApiError without FIM tokens.
  std::vector<int32_t> infill(const std::string &prefix, const std::string &suffix,
                              const std::vector<InfillFile> &extra,
                              const std::string &prompt) const;

  // Tokens that end an answer besides eos: the chat format's end-of-message
  // and start-of-message markers for chat, the FIM and file markers for infill.
  std::vector<int32_t> chat_stop_ids() const;
  std::vector<int32_t> infill_stop_ids() const;

  bool has_chat() const { return !chat_format_.empty(); }
  // "chatml", "llama3" or "" (vegas_tokenizer_chat_format).
  const std::string &chat_format() const { return chat_format_; }
  bool has_fim() const {
    return special_.fim_prefix >= 0 && special_.fim_suffix >= 0 && special_.fim_middle >= 0;
  }

 private:
  void append_text(std::vector<int32_t> *ids, const std::string &text, bool parse_special) const;

  int32_t token(const char *name) const;  // -1 when absent

  const vegas_tokenizer *tokenizer_;
  vegas_special_tokens special_{};
  std::string chat_format_;
};

}  // namespace vegas_server
