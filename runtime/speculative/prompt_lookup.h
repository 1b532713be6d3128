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
std::vector<int32_t> prompt_lookup(const int32_t *context, size_t size, int32_t max_drafts,
                                   const PromptLookupParams &params = {});

// The policy names of prompt lookup: "lookup" alone, or "P+lookup", which
// drafts each round by lookup or by the sparse policy P. Returns P for such a
// hybrid name, else empty.
std::string lookup_hybrid_base(const std::string &policy);

}  // namespace vegas
