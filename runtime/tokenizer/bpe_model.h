// The BPE model of tokenizer.json: vocabulary, ranked merges, and the merge
// loop of Hugging Face's Word::merge_all (lowest rank first, then leftmost),
// with a bounded per-word cache.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/word_cache.h"

namespace vegas {

class BpeModel {
 public:
  // `model` is the JSON value of "model". Throws FORMAT (what is wrong) or
  // UNSUPPORTED (the model type or an option libvegas does not implement).
  explicit BpeModel(const nlohmann::json &model);

  // Appends the ids of one pre-tokenized word. Thread-safe.
  void tokenize(const std::string &word, std::vector<int32_t> &out) const;

  // Vocabulary id of `token`, or -1.
  int32_t find(std::string_view token) const;
  // Size of the id space the model's vocabulary spans (max id + 1).
  int32_t id_space() const { return static_cast<int32_t>(id_to_token_.size()); }
  // The vocabulary string of `id` ("" for an id the vocabulary does not use).
  const std::string &token(int32_t id) const { return id_to_token_[static_cast<size_t>(id)]; }
  void clear_cache() const { cache_.clear(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void merge_word(std::string_view word, std::vector<int32_t> &out) const;

  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string_view, int32_t> vocab_;  // views into id_to_token_
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  mutable WordCache cache_{1 << 16};
};

}  // namespace vegas
