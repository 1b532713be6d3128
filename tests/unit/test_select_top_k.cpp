// Top-k selection and the window hybrid against full-sort references on
// random scores with heavy ties, NaN and infinities; and the vegas policy end
// to end (reduction + budget + window + top-k) against a brute-force build.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "select/score_reduce.h"
#include "select/select_options.h"
#include "select/select_policy.h"
#include "select/top_k_select.h"
#include "select_reference.h"

namespace vegas {
namespace {

float key(float s) {
  return std::isnan(s) ? -std::numeric_limits<float>::infinity() : s;
}

// Proves select_top_k equals the sort-based top-k exactly (same tie rule), and,
// independently of any tie rule, that no unchosen score beats a chosen one.
TEST(SelectTopK, MatchesSortReference) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 400; ++trial) {
    const int32_t m = 1 + static_cast<int32_t>(rng() % 300);
    const int32_t k = static_cast<int32_t>(rng() % (m + 2));  // includes 0, m and m + 1
    std::vector<float> s = trial % 2 ? select_ref::tied_scores(rng, m, 1 + trial % 7)
                                     : select_ref::uniform_scores(rng, m, -3.0f, 3.0f);
    if (trial % 5 == 0) s[rng() % m] = std::numeric_limits<float>::quiet_NaN();
    if (trial % 7 == 0) s[rng() % m] = -std::numeric_limits<float>::infinity();
    if (trial % 11 == 0) s[rng() % m] = std::numeric_limits<float>::infinity();
    std::vector<int32_t> scratch(static_cast<size_t>(m)), out(static_cast<size_t>(m));
    const int32_t count = select_top_k(s.data(), m, k, scratch.data(), out.data());
    out.resize(static_cast<size_t>(count));
    ASSERT_EQ(out, select_ref::top_k(s, m, k)) << "trial " << trial;

    std::vector<char> chosen(static_cast<size_t>(m), 0);
    for (int32_t pos : out) chosen[pos] = 1;
    float worst_chosen = std::numeric_limits<float>::infinity();
    float best_other = -std::numeric_limits<float>::infinity();
    for (int32_t i = 0; i < m; ++i) {
      if (chosen[i])
        worst_chosen = std::min(worst_chosen, key(s[i]));
      else
        best_other = std::max(best_other, key(s[i]));
    }
    if (count > 0 && count < m) {
      EXPECT_GE(worst_chosen, best_other) << "trial " << trial;
    }
  }
}

// Proves all-equal scores resolve to the most recent positions (the documented
// tie rule), and NaN never beats a number.
TEST(SelectTopK, TieAndNanRule) {
  std::vector<float> s(10, 1.0f);
  std::vector<int32_t> scratch(10), out(10);
  ASSERT_EQ(select_top_k(s.data(), 10, 3, scratch.data(), out.data()), 3);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 3), (std::vector<int32_t>{7, 8, 9}));
  s[9] = std::numeric_limits<float>::quiet_NaN();
  s[0] = -1e30f;
  ASSERT_EQ(select_top_k(s.data(), 10, 9, scratch.data(), out.data()), 9);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 9),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

// Proves the hybrid is exactly [n - w, n) plus the sort-based top (k - w) of
// [0, n - w), for every window from 0 to k.
TEST(SelectTopK, WindowHybridMatchesConstruction) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 300; ++trial) {
    const int32_t n = 1 + static_cast<int32_t>(rng() % 400);
    const int32_t k = static_cast<int32_t>(rng() % (n + 1));
    const int32_t w = static_cast<int32_t>(rng() % (k + 1));
    const std::vector<float> s = trial % 3 ? select_ref::uniform_scores(rng, n, 0.0f, 1.0f)
                                           : select_ref::tied_scores(rng, n, 3);
    std::vector<int32_t> want = select_ref::top_k(s, n - w, k - w);
    for (int32_t pos = n - w; pos < n; ++pos) want.push_back(pos);
    std::vector<int32_t> scratch(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    const int32_t count = select_window_top_k(s.data(), n, k, w, scratch.data(), out.data());
    out.resize(static_cast<size_t>(count));
    ASSERT_EQ(out, want) << "trial " << trial << " n " << n << " k " << k << " w " << w;
  }
}

// A random 2-row view for the policy tests.
struct RandomView {
  int32_t n, heads = 4;
  std::vector<float> logits, lse;
  RandomView(int32_t n_, uint32_t seed) : n(n_) {
    std::mt19937 rng(seed);
    logits = select_ref::uniform_scores(rng, 2 * heads * n, -6.0f, 6.0f);
    lse = select_ref::uniform_scores(rng, 2 * heads, 6.0f, 9.0f);
  }
  SelectInput input() const {
    SelectInput in;
    in.n = n;
    in.scores.logits = logits.data();
    in.scores.lse = lse.data();
    in.scores.n_rows = 2;
    in.scores.stride = n;
    return in;
  }
};

SelectionShape shape_for(int32_t max_n) {
  SelectionShape shape;
  shape.max_candidates = max_n;
  shape.max_rows = 7;
  shape.n_heads = 4;
  shape.n_kv_heads = 2;
  shape.head_dim = 8;
  return shape;
}

std::vector<int32_t> run_vegas(const SelectionOptions &options, const RandomView &rv) {
  auto policy = make_selection_policy("vegas", options, shape_for(rv.n));
  std::vector<int32_t> out(static_cast<size_t>(rv.n));
  out.resize(static_cast<size_t>(policy->select(rv.input(), out.data(), rv.n)));
  return out;
}

// Proves the vegas policy equals the brute-force construction: reduced scores,
// k from the budget formula, round(share * k) recent positions, the rest by a
// full sort, for both score kinds and several shares.
TEST(SelectTopK, VegasPolicyMatchesBruteForce) {
  for (uint32_t seed = 0; seed < 12; ++seed) {
    const RandomView rv(500 + 97 * static_cast<int32_t>(seed), seed);
    SelectionOptions options;
    options.ratio = 0.07f;
    options.min_tokens = 16;
    options.window_share = std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f}[seed % 4];
    options.score_kind = seed % 2 ? ScoreKind::kLogit : ScoreKind::kWeight;
    std::vector<float> scores(static_cast<size_t>(rv.n));
    const int32_t rows[2] = {0, 1};
    reduce_scores(rv.input().scores, 4, rows, 2, rv.n, options.score_kind, scores.data());
    const int32_t k = static_cast<int32_t>(std::ceil(0.07 * rv.n));  // never an integer here
    const int32_t w = static_cast<int32_t>(std::lround(options.window_share * k));
    std::vector<int32_t> want = select_ref::top_k(scores, rv.n - w, k - w);
    for (int32_t pos = rv.n - w; pos < rv.n; ++pos) want.push_back(pos);
    EXPECT_EQ(run_vegas(options, rv), want) << "seed " << seed;
  }
}

// Proves the budget edges through the policy: window_share 1 keeps exactly the
// last k positions, ratio 1 and n < min_tokens keep everything, ratio 0 with
// min_tokens 0 keeps nothing.
TEST(SelectTopK, VegasPolicyBudgetEdges) {
  const RandomView rv(1000, 5);
  SelectionOptions options;
  options.min_tokens = 0;
  options.window_share = 1.0f;
  options.ratio = 0.1f;
  std::vector<int32_t> last100;
  for (int32_t pos = 900; pos < 1000; ++pos) last100.push_back(pos);
  EXPECT_EQ(run_vegas(options, rv), last100);

  std::vector<int32_t> all;
  for (int32_t pos = 0; pos < 1000; ++pos) all.push_back(pos);
  options.window_share = 0.0f;
  options.ratio = 1.0f;
  EXPECT_EQ(run_vegas(options, rv), all);
  options.ratio = 0.07f;
  options.min_tokens = 2000;
  EXPECT_EQ(run_vegas(options, rv), all);
  options.ratio = 0.0f;
  options.min_tokens = 0;
  EXPECT_TRUE(run_vegas(options, rv).empty());
}

}  // namespace
}  // namespace vegas
