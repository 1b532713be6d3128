// The Tokenizer for a tokenizer.json byte-level BPE: added tokens, normalizer,
// pre-tokenizer, BPE model, post-processor and ByteLevel decoder, in the order
// Hugging Face's Tokenizer::encode runs them.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace vegas {

class BpeTokenizer final : public Tokenizer {
 public:
  // `config` is tokenizer_config.json (null when absent).
  BpeTokenizer(const nlohmann::json &tokenizer, const nlohmann::json &config);

  std::vector<int32_t> encode(std::string_view text, bool parse_special,
                              bool add_special) const override;
  std::string decode(const int32_t *ids, size_t n, bool skip_special) const override;
  const std::string &token_bytes(int32_t id) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t find_token(std::string_view text) const override;
  bool is_special(int32_t id) const override;
  const SpecialTokenIds &special_ids() const override { return special_ids_; }
  const std::string &chat_template() const override { return chat_template_; }
  void clear_cache() const override { model_.clear_cache(); }

 private:
  void encode_plain(std::string_view text, std::vector<std::string> &words,
                    std::vector<int32_t> &ids) const;
  void read_special_ids(const nlohmann::json &config);

  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  BpeModel model_;
  AddedVocabulary added_;
  PostProcessor post_processor_;
  std::unordered_map<std::string, int32_t> added_ids_;  // content -> id
  std::vector<std::string> token_bytes_;                // per id, ByteLevel-decoded
  std::vector<bool> special_;
  int32_t vocab_size_ = 0;
  SpecialTokenIds special_ids_;
  bool add_bos_ = false, add_eos_ = false;
  std::string chat_template_;
};

}  // namespace vegas
