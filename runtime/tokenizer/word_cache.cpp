#include "tokenizer/word_cache.h"

#include <functional>

namespace vegas {

WordCache::Shard &WordCache::shard_for(const std::string &word) const {
  return shards_[std::hash<std::string>{}(word) % kShards];
}

bool WordCache::lookup(const std::string &word, std::vector<int32_t> &out) const {
  Shard &shard = shard_for(word);
  std::lock_guard<std::mutex> lock(shard.mutex);
  const auto it = shard.map.find(word);
  if (it == shard.map.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::store(const std::string &word, const int32_t *ids, size_t n) const {
  Shard &shard = shard_for(word);
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.map.size() >= shard_capacity_) shard.map.clear();
  shard.map.emplace(word, std::vector<int32_t>(ids, ids + n));
}

void WordCache::clear() const {
  for (Shard &shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mutex);
    shard.map.clear();
  }
}

}  // namespace vegas
