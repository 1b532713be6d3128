// Quest: key bounds from the paged K cache, page scores against a brute force
// in double, the bound property that makes Quest sound, and the chosen pages
// being the top ones that fit the budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "common/error.h"
#include "select/quest_pages.h"
#include "select/select_policy.h"
#include "select_reference.h"

namespace vegas {
namespace {

constexpr int32_t kHeads = 8, kKvHeads = 2, kDim = 16, kKvPage = 4;

// A sequence of n tokens in a paged K cache whose pages are shuffled.
struct PagedSequence {
  int32_t n;
  std::vector<float> cache;
  std::vector<int32_t> table;
  PagedSequence(int32_t n_, uint32_t seed) : n(n_) {
    std::mt19937 rng(seed);
    const int32_t pages = (n + kKvPage - 1) / kKvPage + 3;  // spare pages in the pool
    table.resize(static_cast<size_t>((n + kKvPage - 1) / kKvPage));
    std::vector<int32_t> all(static_cast<size_t>(pages));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    std::copy(all.begin(), all.begin() + static_cast<int64_t>(table.size()), table.begin());
    cache = select_ref::uniform_scores(rng, pages * kKvPage * kKvHeads * kDim, -2.0f, 2.0f);
  }
  const float *key(int32_t pos, int32_t kv_head) const {
    const int64_t slot = static_cast<int64_t>(table[pos / kKvPage]) * kKvPage + pos % kKvPage;
    return cache.data() + (slot * kKvHeads + kv_head) * kDim;
  }
  PagedKeys keys() const {
    PagedKeys k;
    k.k_cache = cache.data();
    k.page_table = table.data();
    k.kv_page_size = kKvPage;
    k.n_kv_heads = kKvHeads;
    k.head_dim = kDim;
    return k;
  }
};

// Proves the bounds of every quest page (size 6, not a multiple of the KV page
// size 4; the last page partial) are the exact element-wise min/max of its keys.
TEST(SelectQuest, KeyBoundsMatchBruteForce) {
  const PagedSequence seq(37, 3);
  const int32_t qps = 6, pages = 7;
  std::vector<float> mn(pages * kKvHeads * kDim), mx(mn.size());
  compute_key_bounds(seq.keys(), 37, qps, 0, pages, mn.data(), mx.data());
  for (int32_t page = 0; page < pages; ++page)
    for (int32_t h = 0; h < kKvHeads; ++h)
      for (int32_t d = 0; d < kDim; ++d) {
        float lo = 1e30f, hi = -1e30f;
        for (int32_t pos = page * qps; pos < std::min(37, (page + 1) * qps); ++pos) {
          lo = std::min(lo, seq.key(pos, h)[d]);
          hi = std::max(hi, seq.key(pos, h)[d]);
        }
        const size_t at = (static_cast<size_t>(page) * kKvHeads + h) * kDim + d;
        ASSERT_EQ(mn[at], lo) << page << " " << h << " " << d;
        ASSERT_EQ(mx[at], hi) << page << " " << h << " " << d;
      }
}

struct QuestCase {
  PagedSequence seq;
  int32_t qps, pages;
  std::vector<float> mn, mx, query;
  QuestCase(int32_t n, int32_t qps_, uint32_t seed)
      : seq(n, seed), qps(qps_), pages((n + qps_ - 1) / qps_) {
    mn.resize(static_cast<size_t>(pages) * kKvHeads * kDim);
    mx.resize(mn.size());
    compute_key_bounds(seq.keys(), n, qps, 0, pages, mn.data(), mx.data());
    std::mt19937 rng(seed + 1000);
    query = select_ref::uniform_scores(rng, kHeads * kDim, -1.5f, 1.5f);
  }
  PageBoundsView bounds() const {
    PageBoundsView b;
    b.key_min = mn.data();
    b.key_max = mx.data();
    b.n_pages = pages;
    return b;
  }
};

// Proves page scores equal sum over query heads and dims of
// max(q * max, q * min) with query head h reading KV head h / 4 (computed here
// in double), and that a page's score bounds sum_h q_h . k for each of its tokens.
TEST(SelectQuest, PageScoresAndUpperBound) {
  const QuestCase qc(203, 16, 11);
  std::vector<float> scores(static_cast<size_t>(qc.pages));
  quest_page_scores(qc.query.data(), qc.bounds(), qc.pages, kHeads, kKvHeads, kDim, scores.data());
  for (int32_t page = 0; page < qc.pages; ++page) {
    double want = 0, magnitude = 0;
    for (int32_t h = 0; h < kHeads; ++h)
      for (int32_t d = 0; d < kDim; ++d) {
        const size_t at = (static_cast<size_t>(page) * kKvHeads + h / 4) * kDim + d;
        const double q = qc.query[h * kDim + d];
        want += std::max(q * qc.mx[at], q * qc.mn[at]);
        magnitude += std::fabs(q) * std::max(std::fabs(qc.mx[at]), std::fabs(qc.mn[at]));
      }
    EXPECT_NEAR(scores[page], want, 1e-6 * magnitude) << page;
    for (int32_t pos = page * 16; pos < std::min(203, (page + 1) * 16); ++pos) {
      double dot = 0;
      for (int32_t h = 0; h < kHeads; ++h)
        for (int32_t d = 0; d < kDim; ++d)
          dot += qc.query[h * kDim + d] * qc.seq.key(pos, h / 4)[d];
      EXPECT_LE(dot, scores[page] + 1e-6 * magnitude) << pos;
    }
  }
}

std::vector<int32_t> run_quest(const QuestCase &qc, float ratio, int32_t min_tokens) {
  SelectionShape shape;
  shape.max_candidates = 4096;
  shape.n_heads = kHeads;
  shape.n_kv_heads = kKvHeads;
  shape.head_dim = kDim;
  SelectionOptions options;
  options.ratio = ratio;
  options.min_tokens = min_tokens;
  options.quest_page_size = qc.qps;
  auto policy = make_selection_policy("quest", options, shape);
  SelectInput in;
  in.n = qc.seq.n;
  in.query = qc.query.data();
  in.pages = qc.bounds();
  std::vector<int32_t> out(static_cast<size_t>(in.n));
  out.resize(static_cast<size_t>(policy->select(in, out.data(), in.n)));
  return out;
}

// Proves the quest policy keeps whole pages, exactly the best-ranked pages
// taken in order while they fit k (with a partial last page), and that no
// unchosen page outscores a chosen one.
TEST(SelectQuest, ChosenPagesAreTheTopOnesThatFit) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const int32_t n = 300 + 37 * static_cast<int32_t>(seed);
    const QuestCase qc(n, 16, seed);
    std::vector<float> scores(static_cast<size_t>(qc.pages));
    quest_page_scores(qc.query.data(), qc.bounds(), qc.pages, kHeads, kKvHeads, kDim,
                      scores.data());
    const int32_t k = static_cast<int32_t>(std::ceil(0.15 * n));
    std::vector<int32_t> want;
    std::vector<char> chosen(static_cast<size_t>(qc.pages), 0);
    int32_t tokens = 0;
    for (int32_t page : select_ref::ranked(scores, qc.pages)) {
      const int32_t size = std::min(16, n - page * 16);
      if (tokens + size > k) break;
      tokens += size;
      chosen[page] = 1;
    }
    for (int32_t pos = 0; pos < n; ++pos)
      if (chosen[pos / 16]) want.push_back(pos);
    const std::vector<int32_t> got = run_quest(qc, 0.15f, 0);
    ASSERT_EQ(got, want) << "seed " << seed;
    EXPECT_LE(static_cast<int32_t>(got.size()), k);
    EXPECT_GT(static_cast<int32_t>(got.size()), k - 16);
    float worst_chosen = 1e30f, best_other = -1e30f;
    for (int32_t page = 0; page < qc.pages; ++page) {
      if (chosen[page]) {
        worst_chosen = std::min(worst_chosen, scores[page]);
      } else {
        best_other = std::max(best_other, scores[page]);
      }
    }
    EXPECT_GE(worst_chosen, best_other) << "seed " << seed;
  }
}

// Proves ratio 1 keeps every position (partial last page included) and that a
// missing query or missing bounds are refused.
TEST(SelectQuest, FullBudgetAndMissingInputs) {
  const QuestCase qc(45, 16, 5);
  std::vector<int32_t> all(45);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(run_quest(qc, 1.0f, 0), all);

  SelectionShape shape;
  shape.max_candidates = 64;
  shape.n_heads = kHeads;
  shape.n_kv_heads = kKvHeads;
  shape.head_dim = kDim;
  auto policy = make_selection_policy("quest", {}, shape);
  SelectInput in;
  in.n = 45;
  in.pages = qc.bounds();
  std::vector<int32_t> out(45);
  EXPECT_THROW(policy->select(in, out.data(), 45), Error);
  in.query = qc.query.data();
  in.pages.n_pages = 2;  // 45 tokens need 3 pages
  EXPECT_THROW(policy->select(in, out.data(), 45), Error);
}

}  // namespace
}  // namespace vegas
