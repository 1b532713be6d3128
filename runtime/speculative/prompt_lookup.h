// Prompt lookup drafting (the policy "lookup", issue P2 "drafters"): a
// round's drafts are the tokens that followed earlier occurrences of the
// sequence's last n tokens (n from max_ngram down to min_ngram), no forward
// pass at all. Where the suffix occurred several times, its latest
// `max_votes` occurrences vote token by token: each draft is the next token
// most of the occurrences still agreeing with the drafts so far have (ties
// to the latest occurrence). Code repeats itself (identifiers, call patterns, the
// lines an edit copies), so such matches are frequent; verification keeps
// the output exactly vanilla's whatever is proposed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vegas {

struct PromptLookupParams {
  int32_t max_ngram = 4;
  int32_t min_ngram = 1;
  int32_t max_votes = 8;
};

// Up to `max_drafts` tokens proposed from `context` (`size` ids: prompt and
// generated tokens, the newest last) by its longest suffix of
// max_ngram..min_ngram tokens that occurred before; empty when none did.
// The rule's plain form: it scans the whole context (PromptLookupIndex gives
// the same drafts without the scan).
std::vector<int32_t> prompt_lookup(const int32_t *context, size_t size, int32_t max_drafts,
                                   const PromptLookupParams &params = {});

// A sequence's n-gram index for prompt lookup: per n, the starts of every
// n-gram of the context chained latest first by the n-gram's hash, so a
// proposal walks only the suffix's own occurrences instead of the context (a
// scan of an 8K context is ~0.1 ms a sequence, paid every round). A
// sequence's context only grows; the index takes the new tokens each round.
// Its maps' nodes come from one arena, released in a few blocks: freeing 64
// indexes of 2K-token prompts node by node cost ~20 ms of a batch's decode
// on the H100's host.
class PromptLookupIndex {
 public:
  explicit PromptLookupIndex(const PromptLookupParams &params = {});

  // Indexes the n-grams that end in context[indexed_size(), size). The first
  // indexed_size() ids must be those indexed before; a shorter context is
  // indexed anew.
  void extend(const int32_t *context, size_t size);
  size_t indexed_size() const { return indexed_; }

  // prompt_lookup(context, size, max_drafts, params) for the indexed context
  // (extend(context, size) first).
  std::vector<int32_t> propose(const int32_t *context, size_t size, int32_t max_drafts) const;

 private:
  // n-gram hash -> its latest start, open addressing in two flat arrays: a
  // node map was slow to fill and, node by node, to free (64 sequences
  // finishing together stalled a step; the commit has the timings).
  class LatestStarts {
   public:
    void reserve(size_t entries);  // room for `entries` without growing
    // Makes `start` the latest of `hash`; returns the one before it, or -1.
    int32_t exchange(uint64_t hash, int32_t start);
    int32_t find(uint64_t hash) const;  // the latest start of `hash`, or -1

   private:
    static uint64_t key_of(uint64_t hash) { return hash == 0 ? 1 : hash; }  // 0 marks empty
    size_t slot_of(uint64_t key) const;
    std::vector<uint64_t> keys_;  // 0: empty (a hash of 0 is stored as 1)
    std::vector<int32_t> starts_;
    size_t used_ = 0;
  };
  struct Chains {
    LatestStarts latest;
    std::vector<int32_t> previous;  // start -> the previous start of its hash, or -1
  };

  PromptLookupParams params_;
  std::vector<Chains> chains_;  // [n - 1]
  size_t indexed_ = 0;
};

std::string lookup_hybrid_base(const std::string &policy);
// The same for "P+model" (a draft model against P's sparse passes).
std::string model_hybrid_base(const std::string &policy);
// The same for "P@model" (P's sparse passes on sets a draft model's
// attention picks: SpecAttn).
std::string draft_selected_base(const std::string &policy);

}  // namespace vegas
