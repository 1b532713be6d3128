// Tests of runtime/sampling: the logit rules against a brute-force reference,
// penalties, greedy ties, the counter-based Rng and the inverse-CDF sampler.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <numeric>
#include <set>
#include <vector>

#include "chi_square.h"
#include "common/error.h"
#include "sampling/sampling.h"

namespace vegas {
namespace {

using test::chi_square;
using test::chi_square_p_value;

constexpr double kAlpha = 1e-3;  // significance level of every chi-square test here

// Box-Muller normals from the library's own Rng (deterministic test data).
std::vector<float> random_logits(int32_t n, float sigma, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto &x : v) {
    const double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
    x = static_cast<float>(sigma * std::sqrt(-2.0 * std::log(u1)) *
                           std::cos(6.283185307179586 * u2));
  }
  return v;
}

// The reference: the definitions applied literally, in double, with full sorts.
// Temperature -> top-k (keep logits >= the k-th largest) -> top-p (smallest
// prefix by descending probability with mass >= top_p) -> min-p (p >= min_p *
// p_max) -> renormalise. Returns probabilities indexed by id (0 = removed).
std::vector<double> reference(const std::vector<float> &logits, const SamplingParams &sp) {
  const size_t n = logits.size();
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<double> p(n, 0.0);
  const double max = logits[order[0]];
  for (size_t i = 0; i < n; ++i)
    if (logits[i] != -INFINITY) p[i] = std::exp((logits[i] - max) / sp.temperature);
  auto normalise = [&] {
    const double s = std::accumulate(p.begin(), p.end(), 0.0);
    for (double &x : p) x /= s;
  };
  normalise();
  if (sp.top_k > 0 && static_cast<size_t>(sp.top_k) < n) {
    const float kth = logits[order[sp.top_k - 1]];
    for (size_t i = 0; i < n; ++i)
      if (logits[i] < kth) p[i] = 0.0;
    normalise();
  }
  if (sp.top_p < 1.0f) {
    double mass = 0.0;
    size_t r = 0;
    for (; r < n && mass < sp.top_p; ++r) mass += p[order[r]];
    for (; r < n; ++r) p[order[r]] = 0.0;
    normalise();
  }
  if (sp.min_p > 0.0f) {
    const double pmax = *std::max_element(p.begin(), p.end());
    for (double &x : p)
      if (x < sp.min_p * pmax) x = 0.0;
    normalise();
  }
  return p;
}

// f32 probabilities against the double reference: exp and the sums in f32
// round at ~1e-7 relative, so 2e-6 absolute is a few ulps of a probability.
constexpr double kProbTolerance = 2e-6;

void expect_matches_reference(const std::vector<float> &logits, const SamplingParams &sp) {
  TokenDistribution d;
  build_distribution(logits.data(), static_cast<int32_t>(logits.size()), sp, {}, &d);
  const std::vector<double> ref = reference(logits, sp);
  std::vector<int32_t> ref_ids;
  for (size_t i = 0; i < ref.size(); ++i)
    if (ref[i] > 0.0) ref_ids.push_back(static_cast<int32_t>(i));
  ASSERT_EQ(d.ids, ref_ids) << "support differs: n=" << logits.size() << " T=" << sp.temperature
                            << " k=" << sp.top_k << " p=" << sp.top_p << " min_p=" << sp.min_p;
  double sum = 0.0;
  for (size_t j = 0; j < d.ids.size(); ++j) {
    EXPECT_NEAR(d.probs[j], ref[d.ids[j]], kProbTolerance) << "id " << d.ids[j];
    sum += d.probs[j];
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

// Proves temperature, top-k (both the heap and the nth_element paths), top-p
// and min-p and their HF order against the literal definitions on random
// logits of several scales and vocabulary sizes, with masked (-inf) tokens.
TEST(BuildDistribution, MatchesBruteForceReference) {
  uint64_t seed = 1;
  for (int32_t n : {7, 1000, 50000}) {
    for (float sigma : {1.0f, 3.0f, 8.0f}) {
      std::vector<float> logits = random_logits(n, sigma, seed++);
      if (n > 7) logits[3] = logits[n / 2] = -INFINITY;
      for (float t : {0.6f, 1.0f, 1.7f})
        for (int32_t k : {0, 1, 5, 20, 3000})
          for (float top_p : {1.0f, 0.95f, 0.5f})
            for (float min_p : {0.0f, 0.05f}) {
              SamplingParams sp;
              sp.temperature = t;
              sp.top_k = k;
              sp.top_p = top_p;
              sp.min_p = min_p;
              expect_matches_reference(logits, sp);
            }
    }
  }
}

double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

// Proves the rules with heavy ties (logits quantised to a few values, and a
// perfectly flat row): the top-p cut and the top-k boundary follow the
// (descending logit, ascending id) ranking exactly as the reference does.
TEST(BuildDistribution, TiedLogitsMatchReference) {
  std::vector<float> quantised = random_logits(20000, 2.0f, 11);
  for (float &x : quantised) x = std::round(x * 2.0f) / 2.0f;
  const std::vector<float> flat(10, 0.25f);
  const std::vector<float> *rows[] = {&quantised, &flat};
  for (const std::vector<float> *logits : rows)
    for (int32_t k : {0, 3, 700})
      for (float top_p : {1.0f, 0.35f, 0.9f}) {
        SamplingParams sp;
        sp.temperature = 0.9f;
        sp.top_k = k;
        sp.top_p = top_p;
        sp.min_p = 0.01f;
        expect_matches_reference(*logits, sp);
      }
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_p = 0.35f;
  TokenDistribution d;
  build_distribution(flat.data(), 10, sp, {}, &d);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{0, 1, 2, 3}));  // 0.3 < 0.35 <= 0.4
}

// Proves extreme but legal rows are handled exactly: logits near the float
// limits (their range overflows f32) and logits differing only by a subnormal.
TEST(BuildDistribution, ExtremeLogitsMatchReference) {
  const std::vector<float> huge = {3e38f, -3e38f, 0.0f, 2.9e38f, -INFINITY};
  const std::vector<float> tiny = {1.4e-45f, 0.0f, 0.0f, 1.4e-45f};
  for (const std::vector<float> *logits : {&huge, &tiny})
    for (float top_p : {1.0f, 0.5f, 0.9f}) {
      SamplingParams sp;
      sp.temperature = 1.0f;
      sp.top_p = top_p;
      expect_matches_reference(*logits, sp);
    }
}

// Proves the 152K-vocabulary paths (the benchmark setting and plain T=1 with
// the whole vocabulary in the support) and prints their cost.
TEST(BuildDistribution, LargeVocabularyMatchesReference) {
  const int32_t n = 152064;
  const std::vector<float> logits = random_logits(n, 4.0f, 99);
  SamplingParams bench;
  bench.temperature = 0.6f;
  bench.top_k = 20;
  bench.top_p = 0.95f;
  SamplingParams plain;
  plain.temperature = 1.0f;
  SamplingParams nucleus;
  nucleus.temperature = 1.0f;
  nucleus.top_p = 0.9f;
  for (const SamplingParams *sp : {&bench, &plain, &nucleus}) {
    expect_matches_reference(logits, *sp);
    TokenDistribution d;
    const int reps = 20;
    // Thread CPU time: the build machine is shared, wall time would measure the neighbours.
    const double t0 = thread_cpu_us();
    for (int r = 0; r < reps; ++r) build_distribution(logits.data(), n, *sp, {}, &d);
    const double us = thread_cpu_us() - t0;
    std::printf("vocab %d T=%.1f top_k=%d top_p=%.2f: support %d, %.0f us CPU per call\n", n,
                sp->temperature, sp->top_k, sp->top_p, d.size(), us / reps);
  }
}

// Proves HF's top-k tie rule: every token tied with the k-th largest logit stays.
TEST(BuildDistribution, TopKKeepsTiesAtTheBoundary) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 2.0f, 0.5f, 2.0f};
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 2;
  TokenDistribution d;
  build_distribution(logits.data(), 6, sp, {}, &d);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{1, 2, 3, 5}));
}

// Proves masked tokens never enter the support and the support is in id order.
TEST(BuildDistribution, MaskedTokensExcludedAndIdsAscending) {
  std::vector<float> logits = random_logits(500, 2.0f, 7);
  for (int i = 0; i < 500; i += 3) logits[i] = -INFINITY;
  SamplingParams sp;
  sp.temperature = 1.3f;
  TokenDistribution d;
  build_distribution(logits.data(), 500, sp, {}, &d);
  EXPECT_TRUE(std::is_sorted(d.ids.begin(), d.ids.end()));
  for (int32_t id : d.ids) EXPECT_NE(id % 3, 0);
  EXPECT_EQ(d.size(), 500 - 167);
  for (float p : d.probs) EXPECT_GT(p, 0.0f);
}

// Proves greedy picks the lowest index among tied maxima, as a one-token distribution.
TEST(BuildDistribution, GreedyTakesLowestIndexOnTies) {
  const std::vector<float> logits = {1.0f, 5.0f, 2.0f, 5.0f, -INFINITY};
  TokenDistribution d;
  build_distribution(logits.data(), 5, SamplingParams{}, {}, &d);
  EXPECT_EQ(d.ids, std::vector<int32_t>{1});
  EXPECT_EQ(d.probs, std::vector<float>{1.0f});
  EXPECT_EQ(argmax(logits.data(), 5), 1);
}

// Proves the penalty arithmetic (repetition as HF/llama.cpp, then OpenAI
// presence/frequency with counts) on hand-computed values, the penalty_last_n
// window, and that greedy decoding sees penalised logits.
TEST(BuildDistribution, PenaltiesMatchHandComputedLogits) {
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f};
  const std::vector<int32_t> history = {0, 0, 1, 3};
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.repetition_penalty = 2.0f;
  sp.presence_penalty = 0.5f;
  sp.frequency_penalty = 0.25f;
  sp.penalty_last_n = -1;
  // id 0 (seen twice): 2/2 - (2*0.25 + 0.5) = 0; id 1: -1*2 - 0.75 = -2.75;
  // id 2 unseen: 0.5; id 3: 3/2 - 0.75 = 0.75.
  const std::vector<float> expected_all = {0.0f, -2.75f, 0.5f, 0.75f};
  SamplingParams plain = sp;
  plain.repetition_penalty = 1.0f;
  plain.presence_penalty = plain.frequency_penalty = 0.0f;
  TokenDistribution got, want;
  build_distribution(logits.data(), 4, sp, history, &got);
  build_distribution(expected_all.data(), 4, plain, {}, &want);
  EXPECT_EQ(got.ids, want.ids);
  EXPECT_EQ(got.probs, want.probs);

  // Only the last two tokens {1, 3}: id 0 keeps its logit 2.0.
  sp.penalty_last_n = 2;
  const std::vector<float> expected_window = {2.0f, -2.75f, 0.5f, 0.75f};
  build_distribution(logits.data(), 4, sp, history, &got);
  build_distribution(expected_window.data(), 4, plain, {}, &want);
  EXPECT_EQ(got.probs, want.probs);

  // Greedy: the raw argmax is id 3 (3.0); penalised it is id 0 (2.0 > 0.75).
  sp.temperature = 0.0f;
  build_distribution(logits.data(), 4, sp, history, &got);
  EXPECT_EQ(got.ids, std::vector<int32_t>{0});
  // penalty_last_n = 0 disables penalties entirely.
  sp.penalty_last_n = 0;
  build_distribution(logits.data(), 4, sp, history, &got);
  EXPECT_EQ(got.ids, std::vector<int32_t>{3});
}

// Proves bad input is a clear vegas::Error with the right status, not a crash.
TEST(BuildDistribution, RejectsBadInput) {
  std::vector<float> logits = {0.1f, 0.2f, 0.3f};
  TokenDistribution d;
  SamplingParams sp;
  sp.temperature = 1.0f;
  auto status_of = [&](const std::vector<float> &l, const SamplingParams &p,
                       const std::vector<int32_t> &h) {
    try {
      build_distribution(l.data(), static_cast<int32_t>(l.size()), p, h, &d);
    } catch (const Error &e) {
      EXPECT_GT(std::string(e.what()).size(), 10u);
      return e.status();
    }
    return VEGAS_OK;
  };
  EXPECT_EQ(status_of(logits, sp, {}), VEGAS_OK);
  EXPECT_EQ(status_of({0.1f, NAN, 0.3f}, sp, {}), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of({0.1f, INFINITY}, sp, {}), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of({-INFINITY, -INFINITY}, sp, {}), VEGAS_ERR_INVALID_ARGUMENT);
  SamplingParams bad = sp;
  bad.top_p = 0.0f;
  EXPECT_EQ(status_of(logits, bad, {}), VEGAS_ERR_INVALID_ARGUMENT);
  bad = sp;
  bad.temperature = -1.0f;
  EXPECT_EQ(status_of(logits, bad, {}), VEGAS_ERR_INVALID_ARGUMENT);
  bad = sp;
  bad.min_p = 1.5f;
  EXPECT_EQ(status_of(logits, bad, {}), VEGAS_ERR_INVALID_ARGUMENT);
  bad = sp;
  bad.repetition_penalty = 0.0f;
  EXPECT_EQ(status_of(logits, bad, {}), VEGAS_ERR_INVALID_ARGUMENT);
  bad = sp;
  bad.top_k = -2;
  EXPECT_EQ(status_of(logits, bad, {}), VEGAS_ERR_INVALID_ARGUMENT);
  bad = sp;
  bad.repetition_penalty = 1.3f;
  EXPECT_EQ(status_of(logits, bad, {0, 3}), VEGAS_ERR_TOKEN_OUT_OF_RANGE);
  EXPECT_EQ(status_of(logits, bad, {0, -1}), VEGAS_ERR_TOKEN_OUT_OF_RANGE);
  try {
    build_distribution(logits.data(), 3, sp, {}, nullptr);
    ADD_FAILURE() << "null output accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_INVALID_ARGUMENT);
  }
  TokenDistribution one;
  one.ids = {4};
  one.probs = {1.0f};
  EXPECT_THROW(sample_from(one, 1.0), Error);
  EXPECT_THROW(sample_from(one, -0.1), Error);
  EXPECT_THROW(sample_from(TokenDistribution{}, 0.5), Error);
}

// Proves draws are a pure function of (seed, counter): same seed -> same
// stream, rewinding reproduces it, different seeds -> different streams.
TEST(Rng, SameSeedSameDrawsDifferentSeedsDiffer) {
  Rng a(42), b(42);
  std::vector<uint64_t> first;
  for (int i = 0; i < 1000; ++i) {
    first.push_back(a.next_u64());
    ASSERT_EQ(first.back(), b.next_u64());
    ASSERT_EQ(first.back(), Rng::hash(42, static_cast<uint64_t>(i)));
  }
  a.set_counter(10);
  EXPECT_EQ(a.next_u64(), first[10]);
  std::set<uint64_t> seen;
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    Rng r(seed);
    const uint64_t x = r.next_u64(), y = r.next_u64();
    EXPECT_TRUE(seen.insert(x).second) << "seed " << seed << " repeats a first draw";
    EXPECT_NE(x, y);
  }
  // A stream is not a shifted copy of its neighbour seed's stream.
  Rng s0(0), s1(1);
  std::vector<uint64_t> v0, v1;
  for (int i = 0; i < 64; ++i) v0.push_back(s0.next_u64()), v1.push_back(s1.next_u64());
  for (uint64_t x : v1) EXPECT_EQ(std::count(v0.begin(), v0.end(), x), 0);
}

// Proves uniform() lies in [0, 1) and is uniform: 64 equal bins, 1M draws,
// chi-square at alpha = 1e-3 (fixed seed, so the result is deterministic).
TEST(Rng, UniformIsUniform) {
  Rng rng(2024);
  std::vector<int64_t> bins(64, 0);
  for (int i = 0; i < 1000000; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ++bins[static_cast<size_t>(u * 64)];
  }
  const auto r = chi_square(bins, std::vector<double>(64, 1.0 / 64));
  EXPECT_GT(r.p_value, kAlpha) << "chi2 = " << r.statistic << " df = " << r.df;
}

// Proves the chi-square helper itself against textbook table values
// (upper 0.1% points: df 5 -> 20.515, df 35 -> 66.619; upper 5%: df 1 -> 3.841).
TEST(ChiSquare, PValuesMatchTables) {
  EXPECT_NEAR(chi_square_p_value(20.515, 5), 1e-3, 2e-6);
  EXPECT_NEAR(chi_square_p_value(66.619, 35), 1e-3, 2e-6);
  EXPECT_NEAR(chi_square_p_value(3.841, 1), 0.05, 2e-5);
  EXPECT_NEAR(chi_square_p_value(2.0, 2), std::exp(-1.0), 1e-12);  // df 2: e^{-x/2}
}

// Proves sample_from draws each token with its probability: 300K draws from a
// processed distribution, chi-square at alpha = 1e-3; the same statistic
// rejects a slightly wrong expectation (two probabilities swapped), so it has power.
TEST(SampleFrom, FrequenciesMatchProbabilities) {
  const std::vector<float> logits = random_logits(12, 1.0f, 5);
  SamplingParams sp;
  sp.temperature = 0.8f;
  sp.top_k = 8;
  TokenDistribution d;
  build_distribution(logits.data(), 12, sp, {}, &d);
  ASSERT_EQ(d.size(), 8);
  std::vector<double> expected(12, 0.0);
  for (int32_t j = 0; j < d.size(); ++j) expected[d.ids[j]] = d.probs[j];
  Rng rng(777);
  std::vector<int64_t> counts(12, 0);
  for (int i = 0; i < 300000; ++i) ++counts[sample_from(d, rng.uniform())];
  const auto good = chi_square(counts, expected);
  EXPECT_EQ(good.impossible_hits, 0);
  EXPECT_GT(good.p_value, kAlpha) << "chi2 = " << good.statistic;
  // Negative control: swap the expected probabilities of the two most likely tokens.
  std::vector<double> wrong = expected;
  std::vector<int32_t> by_p(12);
  std::iota(by_p.begin(), by_p.end(), 0);
  std::sort(by_p.begin(), by_p.end(), [&](int a, int b) { return expected[a] > expected[b]; });
  std::swap(wrong[by_p[0]], wrong[by_p[1]]);
  EXPECT_LT(chi_square(counts, wrong).p_value, kAlpha);
}

// Proves the inverse-CDF boundaries: u = 0 gives the first id, u -> 1 the last,
// zero-probability entries are never drawn.
TEST(SampleFrom, InverseCdfBoundaries) {
  TokenDistribution d;
  d.ids = {2, 5, 9};
  d.probs = {0.25f, 0.0f, 0.75f};
  EXPECT_EQ(sample_from(d, 0.0), 2);
  EXPECT_EQ(sample_from(d, 0.2499), 2);
  EXPECT_EQ(sample_from(d, 0.25), 9);
  EXPECT_EQ(sample_from(d, std::nextafter(1.0, 0.0)), 9);
  EXPECT_FLOAT_EQ(d.prob_of(9), 0.75f);
  EXPECT_EQ(d.prob_of(3), 0.0f);
}

}  // namespace
}  // namespace vegas
