// prompt_lookup (speculative/prompt_lookup.h): the drafts of the policy
// "lookup" are what followed earlier occurrences of the longest context
// suffix of max_ngram..min_ngram tokens, the latest occurrences voting token
// by token.
#include <gtest/gtest.h>

#include <vector>

#include "speculative/prompt_lookup.h"

namespace vegas {
namespace {

using Ids = std::vector<int32_t>;

Ids lookup(const Ids &context, int32_t max_drafts, const PromptLookupParams &params = {}) {
  return prompt_lookup(context.data(), context.size(), max_drafts, params);
}

TEST(PromptLookup, LongestSuffixFirstThenLatestOccurrence) {
  // Suffix [1, 2, 3] occurs at 0 (followed by 9, 9) and its shorter suffix
  // [2, 3] later at 6 (followed by 7): the 3-gram wins.
  EXPECT_EQ(lookup({1, 2, 3, 9, 9, 5, 2, 3, 7, 1, 2, 3}, 2), (Ids{9, 9}));
  // Two occurrences of [4, 5]: the latest one's continuation.
  EXPECT_EQ(lookup({4, 5, 1, 1, 4, 5, 2, 2, 8, 4, 5}, 2, {2, 2, 8}), (Ids{2, 2}));
  // No 3-gram or 2-gram match: the last token alone.
  EXPECT_EQ(lookup({6, 0, 1, 2, 7, 3, 8, 0, 6}, 3), (Ids{0, 1, 2}));
}

TEST(PromptLookup, OccurrencesVoteTokenByToken) {
  // [5] occurred at 4 (then 2), 2 and 0 (then 1): the majority's 1 first,
  // then 5 from both survivors, then a tie (2 after the one at 2, 1 after
  // the one at 0) to the latest.
  EXPECT_EQ(lookup({5, 1, 5, 1, 5, 2, 5}, 3), (Ids{1, 5, 2}));
  // One vote: the latest occurrence alone.
  EXPECT_EQ(lookup({5, 1, 5, 1, 5, 2, 5}, 3, {4, 1, 1}), (Ids{2, 5}));
}

TEST(PromptLookup, ProposalIsCutByMaxDraftsAndByTheContextEnd) {
  EXPECT_EQ(lookup({5, 1, 2, 3, 4, 5}, 3), (Ids{1, 2, 3}));
  EXPECT_EQ(lookup({5, 1, 2, 3, 4, 5}, 10), (Ids{1, 2, 3, 4, 5}));
  // The occurrence may overlap the suffix: [7, 7] after [7, 7, 7].
  EXPECT_EQ(lookup({7, 7, 7}, 4), (Ids{7}));
}

TEST(PromptLookup, NothingWithoutAnEarlierOccurrence) {
  EXPECT_TRUE(lookup({1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(lookup({}, 4).empty());
  EXPECT_TRUE(lookup({3}, 4).empty());
  EXPECT_TRUE(lookup({3, 3}, 0).empty());
  // min_ngram 2: a lone repeated token is not enough.
  EXPECT_TRUE(lookup({6, 0, 1, 2, 7, 3, 8, 0, 6}, 3, {3, 2, 8}).empty());
}

// The hybrid policy names: "P+lookup" gives P, anything else nothing.
TEST(PromptLookup, HybridNamesGiveTheirSparsePolicy) {
  EXPECT_EQ(lookup_hybrid_base("vegas+lookup"), "vegas");
  EXPECT_EQ(lookup_hybrid_base("lookup+lookup"), "lookup");
  EXPECT_EQ(lookup_hybrid_base("lookup"), "");
  EXPECT_EQ(lookup_hybrid_base("+lookup"), "");
  EXPECT_EQ(lookup_hybrid_base("vegas+lookupx"), "");
}

}  // namespace
}  // namespace vegas
