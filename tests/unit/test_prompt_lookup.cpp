// prompt_lookup (speculative/prompt_lookup.h): the drafts of the policy
// "lookup" are what followed earlier occurrences of the longest context
// suffix of max_ngram..min_ngram tokens, the latest occurrences voting token
// by token. PromptLookupIndex proposes the same drafts from its n-gram
// chains as the plain scan does.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "speculative/prompt_lookup.h"

namespace vegas {
namespace {

using Ids = std::vector<int32_t>;

// The scan's drafts, checked equal to an index's built in one go.
Ids lookup(const Ids &context, int32_t max_drafts, const PromptLookupParams &params = {}) {
  const Ids scanned = prompt_lookup(context.data(), context.size(), max_drafts, params);
  PromptLookupIndex index(params);
  index.extend(context.data(), context.size());
  EXPECT_EQ(index.propose(context.data(), context.size(), max_drafts), scanned);
  return scanned;
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

// A context that grows a token or a round at a time, over small alphabets
// (long chains of equal n-grams, more occurrences than votes): the index,
// extended as it grows, proposes what the scan does at every length.
TEST(PromptLookup, IndexMatchesTheScanAsTheContextGrows) {
  std::mt19937 rng(7);
  for (const int32_t alphabet : {2, 3, 8, 50}) {
    for (const PromptLookupParams params :
         {PromptLookupParams{}, PromptLookupParams{3, 2, 1}, PromptLookupParams{6, 1, 20}}) {
      PromptLookupIndex index(params);
      Ids context;
      while (context.size() < 600) {
        const size_t grow = 1 + rng() % 7;
        for (size_t i = 0; i < grow; ++i)
          context.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(alphabet)));
        index.extend(context.data(), context.size());
        ASSERT_EQ(index.indexed_size(), context.size());
        for (const int32_t max_drafts : {1, 6})
          ASSERT_EQ(index.propose(context.data(), context.size(), max_drafts),
                    prompt_lookup(context.data(), context.size(), max_drafts, params))
              << "alphabet " << alphabet << " size " << context.size();
      }
    }
  }
}

// The index's tables are sized from the first context it takes: a context
// that starts with a few ids and grows to thousands of distinct n-grams (a
// large alphabet, then a stretch repeated) makes them grow several times,
// and every proposal on the way is still the scan's.
TEST(PromptLookup, IndexGrowsPastItsFirstContext) {
  std::mt19937 rng(11);
  PromptLookupIndex index;
  Ids context{1, 2};
  index.extend(context.data(), context.size());
  while (context.size() < 3000) {
    const size_t grow = 1 + rng() % 9;
    for (size_t i = 0; i < grow; ++i)
      context.push_back(context.size() > 2200 && context.size() < 2600
                            ? context[context.size() - 1500]
                            : static_cast<int32_t>(rng() % 4000u));
    index.extend(context.data(), context.size());
    ASSERT_EQ(index.propose(context.data(), context.size(), 6),
              prompt_lookup(context.data(), context.size(), 6))
        << "size " << context.size();
  }
}

// A shorter context than the one indexed is indexed anew; a context the
// index has not taken up yet gets no proposal rather than a stale one.
TEST(PromptLookup, IndexStartsOverOnAShorterContextAndNeedsExtend) {
  PromptLookupIndex index;
  const Ids first{1, 2, 3, 1, 2, 3, 1, 2};
  index.extend(first.data(), first.size());
  EXPECT_EQ(index.propose(first.data(), first.size(), 2), (Ids{3, 1}));
  const Ids other{4, 5, 4};
  index.extend(other.data(), other.size());
  EXPECT_EQ(index.indexed_size(), 3u);
  EXPECT_EQ(index.propose(other.data(), other.size(), 2), (Ids{5, 4}));
  const Ids longer{4, 5, 4, 5};
  EXPECT_TRUE(index.propose(longer.data(), longer.size(), 2).empty());
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
