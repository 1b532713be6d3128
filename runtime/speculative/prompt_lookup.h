// Prompt lookup drafting (the policy "lookup", issue P2 "drafters"): a
// round's drafts are the tokens that followed the latest earlier occurrence
// of the sequence's last n tokens (n from max_ngram down to min_ngram), no
// forward pass at all. Code repeats itself (identifiers, call patterns, the
// lines an edit copies), so such matches are frequent; verification keeps
// the output exactly vanilla's whatever is proposed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vegas {

struct PromptLookupParams {
  int32_t max_ngram = 3;
  int32_t min_ngram = 1;
};

// Up to `max_drafts` tokens of `context` (`size` ids: prompt and generated
// tokens, the newest last) that followed the latest earlier occurrence of its
// longest suffix of max_ngram..min_ngram tokens; empty when none occurs.
std::vector<int32_t> prompt_lookup(const int32_t *context, size_t size, int32_t max_drafts,
                                   const PromptLookupParams &params = {});

}  // namespace vegas
