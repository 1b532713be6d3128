// Sorting-free top-p: against a sorted-prefix reference; mass >= p * total and
// minimal (dropping the smallest chosen weight falls below); adversarial ties;
// the min_tokens floor; bad weights; and the topp policy end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "common/error.h"
#include "select/score_reduce.h"
#include "select/select_policy.h"
#include "select/top_p_select.h"
#include "select_reference.h"

namespace vegas {
namespace {

double total_of(const std::vector<float> &w) {
  double t = 0;
  for (float v : w) t += v;
  return t;
}

// Smallest prefix of the documented ranking with mass >= p * total.
std::vector<int32_t> reference_top_p(const std::vector<float> &w, float p) {
  const double target = static_cast<double>(p) * total_of(w);
  std::vector<int32_t> chosen;
  double mass = 0;
  for (int32_t pos : select_ref::ranked(w, static_cast<int32_t>(w.size()))) {
    if (mass >= target) break;
    mass += w[pos];
    chosen.push_back(pos);
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

std::vector<int32_t> run(const std::vector<float> &w, float p, int32_t min_count = 0,
                         TopPStats *stats = nullptr) {
  const int32_t n = static_cast<int32_t>(w.size());
  std::vector<int32_t> scratch(w.size()), out(w.size());
  out.resize(static_cast<size_t>(
      select_top_p(w.data(), n, p, min_count, scratch.data(), out.data(), stats)));
  return out;
}

// Weights that are multiples of 2^-12 below 1: every sum here is exact in
// double, so "mass >= target" is decided without rounding.
std::vector<float> dyadic_weights(std::mt19937 &rng, int32_t n, int levels) {
  std::uniform_int_distribution<int> pick(0, levels);
  std::vector<float> w(static_cast<size_t>(n));
  for (auto &v : w) v = static_cast<float>(pick(rng) * (4096 / (levels + 1))) / 4096.0f;
  return w;
}

// Proves on random weights (few levels, so ties straddle the threshold) that
// the set equals the sorted-prefix reference, reaches p * total, is minimal,
// and used at most 31 bisection rounds.
TEST(SelectTopP, MassReachedAndMinimal) {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 500; ++trial) {
    const int32_t n = 1 + static_cast<int32_t>(rng() % 400);
    const std::vector<float> w = dyadic_weights(rng, n, 1 + trial % 40);
    const float p = std::vector<float>{0.5f, 0.9f, 0.95f, 0.99f, 1.0f, 0.001f}[trial % 6];
    TopPStats stats;
    const std::vector<int32_t> got = run(w, p, 0, &stats);
    ASSERT_EQ(got, reference_top_p(w, p)) << "trial " << trial;
    const double target = static_cast<double>(p) * total_of(w);
    double mass = 0;
    float smallest = std::numeric_limits<float>::infinity();
    for (int32_t pos : got) {
      mass += w[pos];
      smallest = std::min(smallest, w[pos]);
    }
    EXPECT_GE(mass, target) << "trial " << trial;
    if (!got.empty()) {
      EXPECT_LT(mass - smallest, target) << "trial " << trial;
      EXPECT_GT(smallest, 0.0f);  // a zero weight never helps reach the mass
    }
    EXPECT_LE(stats.rounds, 31);
    EXPECT_EQ(stats.mass, mass);
  }
}

// Proves all-equal weights take exactly ceil(p * n) of them, the most recent.
TEST(SelectTopP, AllEqualTakesLatestNeeded) {
  const std::vector<float> w(100, 1.0f / 128);
  std::vector<int32_t> latest50, latest51;
  for (int32_t i = 50; i < 100; ++i) latest50.push_back(i);
  for (int32_t i = 49; i < 100; ++i) latest51.push_back(i);
  EXPECT_EQ(run(w, 0.5f), latest50);
  EXPECT_EQ(run(w, 0.505f), latest51);  // 50.5 weights' worth -> 51
  EXPECT_EQ(run(w, 1.0f).size(), 100u);
}

// Proves adversarial layouts: one dominant weight, many ties just at the
// threshold behind a few larger ones, zeros with p = 1, and all-zero weights.
TEST(SelectTopP, AdversarialTies) {
  std::vector<float> w(64, 1.0f / 4096);
  w[3] = 1.0f;
  EXPECT_EQ(run(w, 0.5f), (std::vector<int32_t>{3}));

  // Four 0.25s (mass 1) then forty 0.125s (mass 5): p * 6 = 3 needs all the
  // 0.25s and 16 of the 0.125s, the latest ones.
  std::vector<float> t;
  for (int i = 0; i < 40; ++i) t.push_back(0.125f);
  for (int i = 0; i < 4; ++i) t.push_back(0.25f);
  std::vector<int32_t> want;
  for (int32_t i = 24; i < 44; ++i) want.push_back(i);
  EXPECT_EQ(run(t, 0.5f), want);

  std::vector<float> z = {0.0f, 0.5f, 0.0f, 0.25f, 0.0f};
  EXPECT_EQ(run(z, 1.0f), (std::vector<int32_t>{1, 3}));
  EXPECT_TRUE(run(std::vector<float>(10, 0.0f), 0.9f).empty());
}

// Proves the min_count floor returns the best min_count by rank (a superset of
// the top-p set) and is capped at n.
TEST(SelectTopP, MinCountFloor) {
  std::mt19937 rng(8);
  const std::vector<float> w = dyadic_weights(rng, 300, 30);
  const std::vector<int32_t> small = run(w, 0.3f);
  ASSERT_LT(small.size(), 120u);
  const std::vector<int32_t> floored = run(w, 0.3f, 120);
  EXPECT_EQ(floored, select_ref::top_k(w, 300, 120));
  EXPECT_TRUE(std::includes(floored.begin(), floored.end(), small.begin(), small.end()));
  EXPECT_EQ(run(w, 0.3f, 1000).size(), 300u);
}

// Proves negative, NaN and infinite weights are refused naming the position.
TEST(SelectTopP, BadWeights) {
  for (float bad :
       {-0.5f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> w(8, 0.1f);
    w[5] = bad;
    try {
      run(w, 0.9f);
      FAIL() << bad;
    } catch (const Error &e) {
      EXPECT_EQ(e.status(), VEGAS_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find("position 5"), std::string::npos) << e.what();
    }
  }
}

// Proves the topp policy selects the reference top-p set of the reduced
// softmax weights of the first and last rows (realistic, non-dyadic floats),
// floored at min_tokens.
TEST(SelectTopP, PolicyEndToEnd) {
  std::mt19937 rng(77);
  const int32_t n = 2000, heads = 4;
  std::vector<float> logits = select_ref::uniform_scores(rng, 3 * heads * n, -4.0f, 4.0f);
  for (int i = 0; i < 40; ++i) logits[rng() % logits.size()] = 7.0f;  // a few sharp keys
  std::vector<float> lse(3 * heads, 14.0f);
  SelectInput in;
  in.n = n;
  in.scores.logits = logits.data();
  in.scores.lse = lse.data();
  in.scores.n_rows = 3;
  in.scores.stride = n;
  SelectionShape shape;
  shape.max_candidates = n;
  shape.max_rows = 3;
  shape.n_heads = heads;
  shape.n_kv_heads = 1;
  shape.head_dim = 8;
  SelectionOptions options;
  options.p = 0.8f;
  options.min_tokens = 0;
  auto policy = make_selection_policy("topp", options, shape);
  std::vector<int32_t> out(n);
  out.resize(static_cast<size_t>(policy->select(in, out.data(), n)));

  std::vector<float> scores(n);
  const int32_t rows[2] = {0, 2};
  reduce_scores(in.scores, heads, rows, 2, n, ScoreKind::kWeight, scores.data());
  EXPECT_EQ(out, reference_top_p(scores, 0.8f));
  EXPECT_GT(out.size(), 100u);  // a proper, non-trivial subset
  EXPECT_LT(out.size(), static_cast<size_t>(n - 100));

  options.min_tokens = 1900;
  auto floored = make_selection_policy("topp", options, shape);
  out.assign(n, -1);
  EXPECT_EQ(floored->select(in, out.data(), n), 1900);
}

}  // namespace
}  // namespace vegas
