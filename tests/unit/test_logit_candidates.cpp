// Tests of logit candidates (sampling.h): a row cut down to the logits its
// processed distribution reads must give build_distribution's result bit for
// bit, for every rule a candidate list may carry, including ties at the k-th
// logit, masked tokens and rows with fewer finite logits than k; and bad rows
// and rules must fail as build_distribution does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "sampling/sampling.h"

namespace vegas {
namespace {

// Logits on a coarse grid (many ties), some masked; `finite` of them finite.
std::vector<float> tied_row(int32_t n, int32_t finite, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n), -INFINITY);
  for (int32_t i = 0; i < finite; ++i) {
    const int32_t at = static_cast<int32_t>(rng.uniform() * n);
    v[static_cast<size_t>(at)] = static_cast<float>(std::floor(rng.uniform() * 12.0)) * 0.5f - 3.0f;
  }
  if (finite > 0 && v[0] == -INFINITY) v[0] = -2.0f;  // at least one finite logit
  return v;
}

bool same(const TokenDistribution &a, const TokenDistribution &b) {
  return a.ids == b.ids && a.probs.size() == b.probs.size() &&
         std::memcmp(a.probs.data(), b.probs.data(), a.probs.size() * sizeof(float)) == 0;
}

// Proves: for random rules (greedy, top-k 1..64 with top-p, min-p and
// temperature) on rows with ties and masks, the distribution from the
// candidates of candidate_k(rule), and from those of a larger k, equals
// build_distribution on the whole row exactly (ids and float bits).
TEST(LogitCandidates, DistributionEqualsWholeRowBitForBit) {
  Rng rng(7);
  const std::vector<int32_t> no_history;
  int checked = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int32_t n = 50 + static_cast<int32_t>(rng.uniform() * 3000);
    const int32_t finite = trial % 5 == 0 ? 1 + static_cast<int32_t>(rng.uniform() * 30) : n;
    std::vector<float> row = tied_row(n, finite, 100 + trial);
    if (trial % 3 == 0)  // smooth rows too: few ties
      for (float &x : row)
        if (x != -INFINITY) x += static_cast<float>(rng.uniform() * 1e-3);
    SamplingParams p;
    p.temperature = trial % 7 == 0 ? 0.0f : static_cast<float>(0.2 + rng.uniform() * 1.5);
    p.top_k = 1 + static_cast<int32_t>(rng.uniform() * kMaxCandidateTopK);
    p.top_p = trial % 2 ? static_cast<float>(0.5 + rng.uniform() * 0.5) : 1.0f;
    p.min_p = trial % 4 == 1 ? static_cast<float>(rng.uniform() * 0.3) : 0.0f;
    const int32_t k = candidate_k(p);
    ASSERT_EQ(k, p.greedy() ? 1 : p.top_k);
    TokenDistribution whole, from_cand, from_wider;
    build_distribution(row.data(), n, p, no_history, &whole);
    LogitCandidates c, wider;
    extract_candidates(row.data(), n, k, &c);
    extract_candidates(row.data(), n, kMaxCandidateTopK + 5, &wider);
    build_distribution_from_candidates(c, p, &from_cand);
    build_distribution_from_candidates(wider, p, &from_wider);
    ASSERT_TRUE(same(whole, from_cand)) << "trial " << trial;
    ASSERT_TRUE(same(whole, from_wider)) << "trial " << trial;
    ++checked;
  }
  EXPECT_EQ(checked, 600);
}

// Proves the candidate set itself: every finite logit >= the k-th largest,
// ties included, ids ascending; all finite logits when there are at most k.
TEST(LogitCandidates, KeepsTiesAtTheKthLogitAndSkipsMasked) {
  const float m = -INFINITY;
  const std::vector<float> row = {1.0f, 3.0f, m, 2.0f, 3.0f, 2.0f, 0.5f, m};
  LogitCandidates c;
  extract_candidates(row.data(), 8, 3, &c);  // 3, 3, then 2 tied twice
  EXPECT_EQ(c.ids, (std::vector<int32_t>{1, 3, 4, 5}));
  EXPECT_EQ(c.logits, (std::vector<float>{3.0f, 2.0f, 3.0f, 2.0f}));
  extract_candidates(row.data(), 8, 1, &c);
  EXPECT_EQ(c.ids, (std::vector<int32_t>{1, 4}));
  extract_candidates(row.data(), 8, 40, &c);  // more than the 6 finite logits
  EXPECT_EQ(c.ids, (std::vector<int32_t>{0, 1, 3, 4, 5, 6}));
}

// Proves which rules may use candidates: penalties and top-k off or above
// the cap read the whole row.
TEST(LogitCandidates, CandidateKOfRules) {
  SamplingParams p;
  EXPECT_EQ(candidate_k(p), 1);  // greedy
  p.temperature = 0.7f;
  EXPECT_EQ(candidate_k(p), 0);  // top-k off
  p.top_k = 20;
  EXPECT_EQ(candidate_k(p), 20);
  p.top_k = kMaxCandidateTopK + 1;
  EXPECT_EQ(candidate_k(p), 0);
  p.top_k = 20;
  p.repetition_penalty = 1.1f;
  EXPECT_EQ(candidate_k(p), 0);
  p.temperature = 0.0f;
  EXPECT_EQ(candidate_k(p), 0);  // greedy with penalties edits logits too
}

// Proves bad rows fail with build_distribution's errors, and bad candidate
// lists or rules that need the whole row are refused.
TEST(LogitCandidates, RejectsBadRowsAndLists) {
  const std::vector<int32_t> no_history;
  std::vector<float> row = {0.0f, NAN, 1.0f};
  LogitCandidates c;
  TokenDistribution d;
  SamplingParams greedy;
  std::string whole_error, cand_error;
  try {
    build_distribution(row.data(), 3, greedy, no_history, &d);
  } catch (const Error &e) {
    whole_error = e.what();
  }
  try {
    extract_candidates(row.data(), 3, 2, &c);
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_INVALID_ARGUMENT);
    cand_error = e.what();
  }
  EXPECT_FALSE(cand_error.empty());
  EXPECT_EQ(cand_error, whole_error);
  row = {-INFINITY, -INFINITY};
  EXPECT_THROW(extract_candidates(row.data(), 2, 1, &c), Error);
  EXPECT_THROW(extract_candidates(row.data(), 2, 0, &c), Error);

  c.ids = {2, 1};
  c.logits = {0.0f, 1.0f};
  EXPECT_THROW(build_distribution_from_candidates(c, greedy, &d), Error);  // not ascending
  c.ids = {1, 2};
  c.logits = {0.0f, INFINITY};
  EXPECT_THROW(build_distribution_from_candidates(c, greedy, &d), Error);
  c.logits = {0.0f};
  EXPECT_THROW(build_distribution_from_candidates(c, greedy, &d), Error);  // lengths differ
  c.ids.clear();
  c.logits.clear();
  EXPECT_THROW(build_distribution_from_candidates(c, greedy, &d), Error);
  c.ids = {1, 2};
  c.logits = {0.0f, 1.0f};
  SamplingParams whole_row;
  whole_row.temperature = 1.0f;  // top-k off
  EXPECT_THROW(build_distribution_from_candidates(c, whole_row, &d), Error);
  build_distribution_from_candidates(c, greedy, &d);
  EXPECT_EQ(d.ids, std::vector<int32_t>{2});
}

}  // namespace
}  // namespace vegas
