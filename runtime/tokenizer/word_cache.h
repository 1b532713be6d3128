// A bounded, thread-safe cache from a pre-tokenized word to its BPE ids.
// Sharded so that encoders on many threads rarely wait on one another.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vegas {

class WordCache {
 public:
  explicit WordCache(size_t capacity) : shard_capacity_(capacity / kShards + 1) {}

  // Appends the cached ids of `word` to `out`; false on a miss.
  bool lookup(const std::string &word, std::vector<int32_t> &out) const;
  // Stores the ids; a full shard is emptied first (cheap, keeps the bound).
  void store(const std::string &word, const int32_t *ids, size_t n) const;
  void clear() const;

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>> map;
  };
  Shard &shard_for(const std::string &word) const;

  size_t shard_capacity_;
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace vegas
