// Added tokens (special and not) and how Hugging Face finds them in text:
// leftmost-longest match over all contents, then single_word / lstrip / rstrip.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/split_regex.h"

namespace vegas {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// One piece of text: [start, end), with the added token it is (-1 for plain text).
struct TextSegment {
  size_t start = 0, end = 0;
  int32_t id = -1;
};

// A byte trie of token contents answering "longest content starting here".
class ContentTrie {
 public:
  void insert(std::string_view content, int32_t token_index);
  // Index of the longest content matching at `pos`, or -1; `*length` gets its length.
  int32_t longest_at(std::string_view text, size_t pos, size_t *length) const;
  bool empty() const { return nodes_.size() <= 1; }

 private:
  struct Node {
    std::unordered_map<unsigned char, int32_t> next;
    int32_t token_index = -1;
  };
  std::vector<Node> nodes_{Node{}};
  bool first_byte_[256] = {};
};

class AddedVocabulary {
 public:
  AddedVocabulary();
  ~AddedVocabulary();
  // `normalize` maps a normalized token's content to its normalized form.
  template <typename NormalizeFn>
  void build(std::vector<AddedToken> tokens, NormalizeFn &&normalize) {
    tokens_ = std::move(tokens);
    for (size_t i = 0; i < tokens_.size(); ++i) {
      const AddedToken &t = tokens_[i];
      if (t.content.empty()) continue;
      if (t.normalized)
        normalized_trie_.insert(normalize(t.content), static_cast<int32_t>(i));
      else
        raw_trie_.insert(t.content, static_cast<int32_t>(i));
    }
  }

  const std::vector<AddedToken> &tokens() const { return tokens_; }
  // Splits `text` into added tokens and plain text, as HF's find_matches does.
  // `normalized_pass` picks the trie of tokens with normalized=true.
  // `skip_special`: special tokens are not matched (HF encode_special_tokens).
  void split(std::string_view text, bool normalized_pass, bool skip_special,
             std::vector<TextSegment> &out) const;
  bool has_normalized_tokens() const { return !normalized_trie_.empty(); }

 private:
  std::vector<AddedToken> tokens_;
  ContentTrie raw_trie_, normalized_trie_;
  std::unique_ptr<SplitRegex> word_char_, space_char_;
};

}  // namespace vegas
