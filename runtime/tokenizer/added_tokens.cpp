#include "tokenizer/added_tokens.h"

#include "tokenizer/utf8.h"

namespace vegas {

void ContentTrie::insert(std::string_view content, int32_t token_index) {
  int32_t node = 0;
  first_byte_[static_cast<unsigned char>(content[0])] = true;
  for (char c : content) {
    const auto b = static_cast<unsigned char>(c);
    auto it = nodes_[node].next.find(b);
    if (it == nodes_[node].next.end()) {
      nodes_.emplace_back();
      const auto child = static_cast<int32_t>(nodes_.size() - 1);
      nodes_[node].next.emplace(b, child);
      node = child;
    } else {
      node = it->second;
    }
  }
  // A later duplicate content keeps the first token (HF ignores duplicates).
  if (nodes_[node].token_index < 0) nodes_[node].token_index = token_index;
}

int32_t ContentTrie::longest_at(std::string_view text, size_t pos, size_t *length) const {
  if (!first_byte_[static_cast<unsigned char>(text[pos])]) return -1;
  int32_t node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto it = nodes_[node].next.find(static_cast<unsigned char>(text[i]));
    if (it == nodes_[node].next.end()) break;
    node = it->second;
    if (nodes_[node].token_index >= 0) {
      best = nodes_[node].token_index;
      *length = i + 1 - pos;
    }
  }
  return best;
}

// HF tests word boundaries with the `regex` crate's Unicode \w and \s.
AddedVocabulary::AddedVocabulary()
    : word_char_(std::make_unique<SplitRegex>(
          R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])", "added token word test")),
      space_char_(std::make_unique<SplitRegex>(R"(\p{White_Space})", "added token space test")) {}

AddedVocabulary::~AddedVocabulary() = default;

void AddedVocabulary::split(std::string_view text, bool normalized_pass, bool skip_special,
                            std::vector<TextSegment> &out) const {
  const ContentTrie &trie = normalized_pass ? normalized_trie_ : raw_trie_;
  auto char_at = [](std::string_view s, size_t pos) {
    size_t end = pos;
    utf8::next_codepoint(s, end);
    return s.substr(pos, end - pos);
  };
  auto char_before = [](std::string_view s, size_t end) {
    size_t start = 0;
    utf8::prev_codepoint(s, end, &start);
    return s.substr(start, end - start);
  };
  size_t start_offset = 0;
  size_t pos = 0;
  while (!trie.empty() && pos < text.size()) {
    size_t len = 0;
    const int32_t index = trie.longest_at(text, pos, &len);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken &token = tokens_[static_cast<size_t>(index)];
    size_t start = pos, stop = pos + len;
    pos = stop;  // the match iterator resumes after the raw match, like aho-corasick's
    if (skip_special && token.special) continue;
    if (token.single_word) {
      const bool start_space = start == 0 || !word_char_->full_match(char_before(text, start));
      const bool stop_space = stop == text.size() || !word_char_->full_match(char_at(text, stop));
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t prev = 0;
        utf8::prev_codepoint(text, s, &prev);
        if (!space_char_->full_match(text.substr(prev, s - prev))) break;
        s = prev;
      }
      start = s > start_offset ? s : start_offset;
    }
    if (token.rstrip) {
      while (stop < text.size() && space_char_->full_match(char_at(text, stop)))
        stop += char_at(text, stop).size();
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, token.id});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace vegas
