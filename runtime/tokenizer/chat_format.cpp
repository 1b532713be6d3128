#include "tokenizer/chat_format.h"

#include <string>

#include "common/error.h"

namespace vegas {

namespace {

bool has_tokens(const Tokenizer &tokenizer, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names)
    if (tokenizer.find_token(n) < 0) return false;
  return true;
}

bool contains(const std::string &text, std::string_view what) {
  return text.find(what) != std::string::npos;
}

// Jinja's trim (Python's str.strip() on the ASCII whitespace).
std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

// A prompt assembled from template markers (special tokens) and message text.
// Adjacent text pieces are tokenized together, as the rendered template's
// text between two special tokens is.
class ChatPrompt {
 public:
  explicit ChatPrompt(const Tokenizer &tokenizer) : tokenizer_(tokenizer) {}
  void marker(std::string_view special) {
    flush();
    const int32_t id = tokenizer_.find_token(special);
    if (id >= 0) ids_.push_back(id);
  }
  void marker_id(int32_t id) {
    flush();
    ids_.push_back(id);
  }
  void text(std::string_view t) { pending_ += t; }
  std::vector<int32_t> finish() {
    flush();
    return std::move(ids_);
  }

 private:
  void flush() {
    if (pending_.empty()) return;
    const std::vector<int32_t> ids = tokenizer_.encode(pending_, false, false);
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    pending_.clear();
  }

  const Tokenizer &tokenizer_;
  std::vector<int32_t> ids_;
  std::string pending_;
};

void chatml(ChatPrompt &p, const std::vector<ChatMessageView> &messages, bool generation) {
  for (const ChatMessageView &m : messages) {
    p.marker("<|im_start|>");
    p.text(m.role);
    p.text("\n");
    p.text(m.content);
    p.marker("<|im_end|>");
    p.text("\n");
  }
  if (!generation) return;
  p.marker("<|im_start|>");
  p.text("assistant\n");
}

void llama3(ChatPrompt &p, const Tokenizer &tokenizer, const std::vector<ChatMessageView> &messages,
            bool generation) {
  const int32_t bos = tokenizer.special_ids().bos;
  auto header = [&](std::string_view role) {
    p.marker("<|start_header_id|>");
    p.text(role);
    p.marker("<|end_header_id|>");
    p.text("\n\n");
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i == 0 && bos >= 0) p.marker_id(bos);
    header(messages[i].role);
    p.text(trim(messages[i].content));
    p.marker("<|eot_id|>");
  }
  if (generation) header("assistant");
}

}  // namespace

ChatFamily chat_family(const Tokenizer &tokenizer) {
  const std::string &t = tokenizer.chat_template();
  const bool chatml_tokens = has_tokens(tokenizer, {"<|im_start|>", "<|im_end|>"});
  if (t.empty()) return chatml_tokens ? ChatFamily::kChatml : ChatFamily::kNone;
  if (contains(t, "<|im_start|>") && chatml_tokens) return ChatFamily::kChatml;
  if (contains(t, "<|start_header_id|>") && contains(t, "<|eot_id|>") &&
      has_tokens(tokenizer, {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}))
    return ChatFamily::kLlama3;
  return ChatFamily::kNone;
}

const char *chat_family_name(ChatFamily family) {
  switch (family) {
    case ChatFamily::kChatml:
      return "chatml";
    case ChatFamily::kLlama3:
      return "llama3";
    case ChatFamily::kNone:
      break;
  }
  return "";
}

std::vector<int32_t> chat_tokenize(const Tokenizer &tokenizer,
                                   const std::vector<ChatMessageView> &messages,
                                   bool add_generation_prompt) {
  ChatPrompt prompt(tokenizer);
  switch (chat_family(tokenizer)) {
    case ChatFamily::kChatml:
      chatml(prompt, messages, add_generation_prompt);
      break;
    case ChatFamily::kLlama3:
      llama3(prompt, tokenizer, messages, add_generation_prompt);
      break;
    case ChatFamily::kNone:
      fail(VEGAS_ERR_UNSUPPORTED,
           tokenizer.chat_template().empty()
               ? "chat: the tokenizer has no chat template (tokenizer_config.json chat_template) "
                 "and no <|im_start|>/<|im_end|> tokens"
               : "chat: the tokenizer's chat template is not one libvegas recognizes (ChatML, "
                 "Llama 3); format the prompt yourself and tokenize it");
  }
  return prompt.finish();
}

}  // namespace vegas
