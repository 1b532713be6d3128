// The one writer of every sequence's KV state: its kv_len (leading tokens
// whose K/V are in the pool), its page table and its prefix-cache cursor.
// The session's steps, the vanilla chain and the speculative rounds change
// them only through here: reserve pages ahead of a forward pass, advance
// past the rows it wrote, settle a verified round (roll back the rejected
// drafts' positions), publish to the prefix cache, release.
#pragma once

#include <cstdint>

#include "kv/kv_pool.h"
#include "session/sequence.h"

namespace vegas {

class SequenceKv {
 public:
  SequenceKv(int32_t num_pages, int32_t page_size, bool prefix_cache)
      : pool_(num_pages, page_size, prefix_cache) {}

  const KvPool &pool() const { return pool_; }

  // A new sequence starts on the longest cached prefix of its first
  // `max_tokens` tokens; kv_len is set to it.
  void attach_prefix(Sequence &seq, int64_t max_tokens);
  // Pages for positions [0, positions); throws KV_FULL with nothing taken
  // from the table's existing pages (it may keep pages added before the failure).
  void reserve(Sequence &seq, int64_t positions);
  // A forward pass wrote `rows` more positions of exact K/V.
  void advance(Sequence &seq, int32_t rows);
  // After verification: positions [0, kv_len) hold exact K/V (the round's
  // first token and its accepted drafts); the pages past the next token's
  // slot, reserved for drafts that were rejected, go back to the pool.
  void settle(Sequence &seq, int32_t kv_len);
  // The sequence's finished pages join the prefix cache.
  void publish(Sequence &seq);
  // Every page back to the pool (published ones stay cached); kv_len 0.
  void release(Sequence &seq);

 private:
  KvPool pool_;
};

}  // namespace vegas
