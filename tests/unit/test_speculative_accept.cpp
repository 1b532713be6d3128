// Tests of the speculative acceptance rule (runtime/sampling/speculative_accept):
// greedy prefix matching, the sampling rule's edge cases, and a statistical
// proof that sampled acceptance is lossless, with negative controls showing the
// statistic detects plausible mistakes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "chi_square.h"
#include "common/error.h"
#include "markov_model.h"
#include "sampling/sampling.h"
#include "sampling/speculative_accept.h"

namespace vegas {
namespace {

constexpr double kAlpha = 1e-3;  // significance level of the chi-square tests here

TokenDistribution dist(std::vector<int32_t> ids, std::vector<float> probs) {
  TokenDistribution d;
  d.ids = std::move(ids);
  d.probs = std::move(probs);
  return d;
}

// Proves greedy acceptance keeps exactly the matching prefix and appends the
// target argmax at the first mismatch, or the bonus when everything matched.
TEST(AcceptGreedy, LongestMatchingPrefixThenCorrection) {
  AcceptResult r;
  const int32_t drafts[] = {5, 7, 9, 11};
  const int32_t all_match[] = {5, 7, 9, 11, 42};
  accept_greedy(drafts, 4, all_match, &r);
  EXPECT_EQ(r.n_accepted, 4);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{5, 7, 9, 11, 42}));
  const int32_t mismatch_at_2[] = {5, 7, 8, 11, 42};
  accept_greedy(drafts, 4, mismatch_at_2, &r);
  EXPECT_EQ(r.n_accepted, 2);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{5, 7, 8}));
  const int32_t mismatch_at_0[] = {6, 7, 9, 11, 42};
  accept_greedy(drafts, 4, mismatch_at_0, &r);
  EXPECT_EQ(r.n_accepted, 0);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{6}));
  // A later match after a mismatch does not count.
  const int32_t later_match[] = {5, 0, 9, 11, 42};
  accept_greedy(drafts, 4, later_match, &r);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{5, 0}));
  // gamma = 0 is vanilla decoding: just the target's token.
  const int32_t only_bonus[] = {3};
  accept_greedy(nullptr, 0, only_bonus, &r);
  EXPECT_EQ(r.n_accepted, 0);
  EXPECT_EQ(r.tokens, std::vector<int32_t>{3});
}

// Proves the sampling rule reduces to the greedy rule on one-token (greedy)
// distributions: p(x)/q(x) is 1 on a match and 0 otherwise.
TEST(AcceptSampled, OneTokenDistributionsBehaveLikeGreedy) {
  Rng gen(3);
  for (int trial = 0; trial < 500; ++trial) {
    const int32_t gamma = static_cast<int32_t>(gen.next_u64() % 5);
    std::vector<int32_t> drafts(gamma), argmaxes(gamma + 1);
    std::vector<TokenDistribution> q, p;
    for (int32_t i = 0; i < gamma; ++i) {
      drafts[i] = static_cast<int32_t>(gen.next_u64() % 3);
      q.push_back(dist({drafts[i]}, {1.0f}));
    }
    for (int32_t i = 0; i <= gamma; ++i) {
      argmaxes[i] = static_cast<int32_t>(gen.next_u64() % 3);
      p.push_back(dist({argmaxes[i]}, {1.0f}));
    }
    AcceptResult greedy, sampled;
    accept_greedy(drafts.data(), gamma, argmaxes.data(), &greedy);
    Rng rng(static_cast<uint64_t>(trial));
    accept_sampled(drafts.data(), q.data(), gamma, p.data(), rng, &sampled);
    ASSERT_EQ(sampled.n_accepted, greedy.n_accepted);
    ASSERT_EQ(sampled.tokens, greedy.tokens);
  }
}

// Proves drafts are always kept when target and draft distributions agree
// (acceptance probability min(1, p/q) = 1), whatever the random draws.
TEST(AcceptSampled, IdenticalDistributionsAcceptEverything) {
  const TokenDistribution d = dist({0, 2, 3}, {0.2f, 0.5f, 0.3f});
  const std::vector<TokenDistribution> q(3, d), p(4, d);
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    Rng rng(seed);
    int32_t drafts[3];
    for (int32_t &x : drafts) x = sample_from(d, rng.uniform());
    AcceptResult r;
    accept_sampled(drafts, q.data(), 3, p.data(), rng, &r);
    ASSERT_EQ(r.n_accepted, 3);
    ASSERT_EQ(r.tokens.size(), 4u);
  }
}

// Proves the residual norm(max(0, p - q)) on a hand-computed case, including
// ids only one side has, and that it is empty when p == q.
TEST(ResidualDistribution, HandComputed) {
  const TokenDistribution p = dist({0, 2, 4}, {0.5f, 0.3f, 0.2f});
  const TokenDistribution q = dist({0, 1, 2}, {0.2f, 0.5f, 0.3f});
  TokenDistribution r;
  residual_distribution(p, q, &r);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 4}));
  ASSERT_EQ(r.probs.size(), 2u);
  EXPECT_NEAR(r.probs[0], 0.6f, 1e-6);  // 0.3 / 0.5
  EXPECT_NEAR(r.probs[1], 0.4f, 1e-6);  // 0.2 / 0.5
  residual_distribution(p, p, &r);
  EXPECT_TRUE(r.ids.empty());
}

// Proves the lazy target callback is asked for rows in order and never past
// the first rejection (a draft the target gives probability 0 is always rejected).
TEST(AcceptSampled, TargetRowsBuiltOnlyUpToTheRejection) {
  const TokenDistribution q = dist({1, 2}, {0.5f, 0.5f});
  const TokenDistribution p_keep = dist({1, 2}, {0.5f, 0.5f});
  const TokenDistribution p_reject = dist({3}, {1.0f});
  const TokenDistribution qs[] = {q, q, q};
  std::vector<int32_t> rows;
  const TargetDistributionFn target = [&](int32_t row) -> const TokenDistribution & {
    rows.push_back(row);
    return row == 1 ? p_reject : p_keep;
  };
  const int32_t drafts[] = {1, 2, 1};
  Rng rng(9);
  AcceptResult r;
  accept_sampled(drafts, qs, 3, target, rng, &r);
  EXPECT_EQ(rows, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(r.n_accepted, 1);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 3}));  // the residual is p_reject itself
}

// Proves bad input is a vegas::Error, not UB: a draft outside its draft
// distribution's support, a negative gamma, missing arrays.
TEST(AcceptSampled, RejectsBadInput) {
  const TokenDistribution q = dist({1, 2}, {0.5f, 0.5f});
  const TokenDistribution p[] = {q, q};
  const int32_t outside[] = {4};
  Rng rng(1);
  AcceptResult r;
  try {
    accept_sampled(outside, &q, 1, p, rng, &r);
    ADD_FAILURE() << "draft outside q accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("token 4"), std::string::npos);
  }
  const int32_t ok[] = {1};
  EXPECT_THROW(accept_sampled(ok, &q, -1, p, rng, &r), Error);
  EXPECT_THROW(accept_sampled(ok, nullptr, 1, p, rng, &r), Error);
  EXPECT_THROW(accept_sampled(ok, &q, 1, static_cast<const TokenDistribution *>(nullptr), rng, &r),
               Error);
  EXPECT_THROW(accept_greedy(ok, -2, ok, &r), Error);
}

// Proves a run is reproducible: the same seed gives the same committed tokens.
TEST(AcceptSampled, SameSeedSameResult) {
  const TokenDistribution q = dist({0, 1, 2}, {0.6f, 0.3f, 0.1f});
  const TokenDistribution p = dist({0, 1, 2}, {0.2f, 0.3f, 0.5f});
  const TokenDistribution qs[] = {q, q}, ps[] = {p, p, p};
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const int32_t drafts[] = {0, 0};
    Rng a(seed), b(seed);
    AcceptResult ra, rb;
    accept_sampled(drafts, qs, 2, ps, a, &ra);
    accept_sampled(drafts, qs, 2, ps, b, &rb);
    ASSERT_EQ(ra.tokens, rb.tokens);
    ASSERT_EQ(a.counter(), b.counter());
  }
}

// ---------------------------------------------------------------- losslessness
//
// The Markov model of markov_model.h: speculative decoding with γ = 3 from
// context token 0 must commit tokens distributed exactly as plain sampling
// from P.

using test::MarkovModel;
constexpr int32_t kVocab = test::kMarkovVocab;
constexpr int32_t kGamma = 3;
constexpr int kTrials = 200000;

using AcceptRule =
    std::function<void(const int32_t *drafts, const TokenDistribution *q, int32_t gamma,
                       const TokenDistribution *p, Rng &rng, AcceptResult *out)>;

struct Committed : test::MarkovCounts {
  std::vector<int64_t> n_accepted = std::vector<int64_t>(kGamma + 1, 0);  // rounds by outcome
};

// Runs draft -> verify -> accept rounds until two tokens are committed, once
// per trial, each trial with its own seed (drafting and acceptance share the
// sequence's Rng, as in the runtime).
Committed simulate(const MarkovModel &m, const AcceptRule &rule) {
  Committed c;
  std::vector<int32_t> committed;
  TokenDistribution q[kGamma], p[kGamma + 1];
  int32_t drafts[kGamma];
  AcceptResult r;
  for (int trial = 0; trial < kTrials; ++trial) {
    Rng rng(0x5eed0000ULL + static_cast<uint64_t>(trial));
    committed.clear();
    int32_t prev = 0;
    while (committed.size() < 2) {
      int32_t ctx = prev;
      for (int32_t i = 0; i < kGamma; ++i) {
        q[i] = m.draft[ctx];
        p[i] = m.target[ctx];
        drafts[i] = sample_from(q[i], rng.uniform());
        ctx = drafts[i];
      }
      p[kGamma] = m.target[ctx];
      rule(drafts, q, kGamma, p, rng, &r);
      if (r.tokens.size() != static_cast<size_t>(r.n_accepted) + 1)
        throw std::logic_error("accept rule returned a malformed result");
      ++c.n_accepted[r.n_accepted];
      committed.insert(committed.end(), r.tokens.begin(), r.tokens.end());
      prev = committed.back();
    }
    ++c.first[committed[0]];
    ++c.pairs[committed[0] * kVocab + committed[1]];
  }
  return c;
}

const AcceptRule kCorrectRule = [](const int32_t *drafts, const TokenDistribution *q, int32_t gamma,
                                   const TokenDistribution *p, Rng &rng, AcceptResult *out) {
  accept_sampled(drafts, q, gamma, p, rng, out);
};

// Proves losslessness: over 200K seeded trials the first committed token and
// the first two committed tokens follow the target chain (chi-square, alpha =
// 1e-3, deterministic seeds), and no token the target forbids is ever committed.
TEST(AcceptSampledLossless, CommittedTokensFollowTheTarget) {
  const MarkovModel m = test::make_markov_model();
  const Committed c = simulate(m, kCorrectRule);
  // Every outcome (rejection at each row, and all drafts kept + bonus) is exercised often.
  for (int32_t k = 0; k <= kGamma; ++k) {
    std::printf("rounds accepting %d drafts: %lld\n", k, static_cast<long long>(c.n_accepted[k]));
    EXPECT_GT(c.n_accepted[k], 1000);
  }
  const test::MarkovVerdict v = test::judge_markov(m, c);
  std::printf("correct rule: first chi2 %.2f (df %d, p %.3g); pairs chi2 %.2f (df %d, p %.3g)\n",
              v.first.statistic, v.first.df, v.first.p_value, v.pairs.statistic, v.pairs.df,
              v.pairs.p_value);
  EXPECT_EQ(v.first.impossible_hits, 0);
  EXPECT_EQ(v.pairs.impossible_hits, 0);
  EXPECT_GT(v.first.p_value, kAlpha);
  EXPECT_GT(v.pairs.p_value, kAlpha);
}

// Deliberately wrong variants of the rule (negative controls).
enum class Defect { kResidualFromTarget, kInvertedRatio };

AcceptRule broken_rule(Defect defect) {
  return [defect](const int32_t *drafts, const TokenDistribution *q, int32_t gamma,
                  const TokenDistribution *p, Rng &rng, AcceptResult *out) {
    out->tokens.clear();
    for (int32_t i = 0; i < gamma; ++i) {
      const double px = p[i].prob_of(drafts[i]), qx = q[i].prob_of(drafts[i]);
      const double u = rng.uniform();
      const bool accept = defect == Defect::kInvertedRatio ? u * px < qx : u * qx < px;
      if (accept) {
        out->tokens.push_back(drafts[i]);
        continue;
      }
      out->n_accepted = i;
      TokenDistribution residual;
      residual_distribution(p[i], q[i], &residual);
      const bool use_p = defect == Defect::kResidualFromTarget || residual.ids.empty();
      out->tokens.push_back(sample_from(use_p ? p[i] : residual, rng.uniform()));
      return;
    }
    out->n_accepted = gamma;
    out->tokens.push_back(sample_from(p[gamma], rng.uniform()));
  };
}

// Proves the losslessness statistic has power: resampling a rejection from p
// instead of norm(max(0, p - q)), or accepting with min(1, q/p), is detected
// at the same alpha by the same simulation and statistic.
TEST(AcceptSampledLossless, StatisticDetectsBrokenRules) {
  const MarkovModel m = test::make_markov_model();
  for (Defect d : {Defect::kResidualFromTarget, Defect::kInvertedRatio}) {
    const test::MarkovVerdict v = test::judge_markov(m, simulate(m, broken_rule(d)));
    std::printf("broken rule %d: first chi2 %.1f (p %.3g); pairs chi2 %.1f (p %.3g)\n",
                static_cast<int>(d), v.first.statistic, v.first.p_value, v.pairs.statistic,
                v.pairs.p_value);
    EXPECT_LT(v.pairs.p_value, kAlpha) << "defect " << static_cast<int>(d) << " not detected";
  }
}

}  // namespace
}  // namespace vegas
