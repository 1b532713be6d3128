// Chat messages to prompt token ids in the model's chat format.
//
// A model's tokenizer_config.json carries its chat template as Jinja source.
// No maintained Jinja engine for C++ is among the project's dependencies (none
// is packaged for Debian), so the template is not executed: its family is
// recognized from the markers it writes, as llama.cpp's built-in templates
// do, and that family's format is produced. Recognized:
//   - chatml: <|im_start|>role\ncontent<|im_end|>\n per message (Qwen and
//     others); also used when there is no template but the vocabulary has
//     <|im_start|> and <|im_end|>;
//   - llama3: bos, then <|start_header_id|>role<|end_header_id|>\n\ncontent
//     <|eot_id|> per message, content trimmed (Llama 3 Instruct).
// A template that adds to its family's format (a default system message, a
// date header, tool definitions) gets the plain family format; anything else
// is refused (UNSUPPORTED) rather than guessed.
//
// The template's markers are special tokens; message text is tokenized with
// special-token parsing off, so no message can forge a role or an end marker.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace vegas {

enum class ChatFamily { kNone, kChatml, kLlama3 };

// The family of the tokenizer's chat template (see above); kNone when it has
// none that is recognized, or lacks the family's special tokens.
ChatFamily chat_family(const Tokenizer &tokenizer);
// "chatml", "llama3", or "" for kNone.
const char *chat_family_name(ChatFamily family);

struct ChatMessageView {
  std::string_view role;
  std::string_view content;
};

// The prompt ids of `messages` (no bos added beyond what the format writes);
// add_generation_prompt appends the assistant's header. Throws UNSUPPORTED
// when the tokenizer has no recognized chat format.
std::vector<int32_t> chat_tokenize(const Tokenizer &tokenizer,
                                   const std::vector<ChatMessageView> &messages,
                                   bool add_generation_prompt);

}  // namespace vegas
