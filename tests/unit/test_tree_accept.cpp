// Tests of token trees' host side (runtime/speculative/draft_tree,
// tree_accept): the tree's layout, greedy acceptance of the longest matching
// path, that a one-branch tree is the chain rule draw for draw, and a
// statistical proof that sampled tree acceptance (recursive rejection
// sampling without replacement) is lossless, with a negative control.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "chi_square.h"
#include "common/error.h"
#include "markov_model.h"
#include "sampling/sampling.h"
#include "sampling/speculative_accept.h"
#include "speculative/draft_tree.h"
#include "speculative/tree_accept.h"

namespace vegas {
namespace {

constexpr double kAlpha = 1e-3;

TokenDistribution dist(std::vector<int32_t> ids, std::vector<float> probs) {
  TokenDistribution d;
  d.ids = std::move(ids);
  d.probs = std::move(probs);
  return d;
}

// root 10 -> {20, 21}; 20 -> {30, 31}; 21 -> {32}; 30 -> {40}.
DraftTree small_tree() {
  DraftTree t(10);
  t.begin_level();
  t.add_child(0, 20);
  t.add_child(0, 21);
  t.begin_level();
  t.add_child(1, 30);
  t.add_child(1, 31);
  t.add_child(2, 32);
  t.begin_level();
  t.add_child(3, 40);
  return t;
}

// Proves the layout the backends rely on: level order, each node's children
// contiguous, parents before children, depths, paths and the main path.
TEST(DraftTree, LevelOrderWithContiguousChildren) {
  const DraftTree t = small_tree();
  ASSERT_EQ(t.n_nodes(), 7);
  EXPECT_EQ(std::vector<int32_t>(t.parents(), t.parents() + 7),
            (std::vector<int32_t>{-1, 0, 0, 1, 1, 2, 3}));
  EXPECT_EQ(std::vector<int32_t>(t.tokens(), t.tokens() + 7),
            (std::vector<int32_t>{10, 20, 21, 30, 31, 32, 40}));
  EXPECT_EQ(t.n_levels(), 4);
  EXPECT_EQ(t.level_begin(2), 3);
  EXPECT_EQ(t.level_end(2), 6);
  EXPECT_EQ(t.level_end(3), 7);
  EXPECT_EQ(t.first_child(1), 3);
  EXPECT_EQ(t.n_children(1), 2);
  EXPECT_EQ(t.n_children(5), 0);
  EXPECT_EQ(t.depth(6), 3);
  EXPECT_EQ(t.path_to(6), (std::vector<int32_t>{1, 3, 6}));
  EXPECT_EQ(t.path_to(0), std::vector<int32_t>{});
  EXPECT_EQ(t.main_path(), (std::vector<int32_t>{0, 1, 3, 6}));
}

// Proves a child out of level order is refused (the backends' slot layout
// would break), as is a child before any level began.
TEST(DraftTree, ChildrenOutOfOrderAreRefused) {
  DraftTree t(1);
  EXPECT_THROW(t.add_child(0, 2), Error);  // no level begun
  t.begin_level();
  t.add_child(0, 2);
  t.add_child(0, 3);
  t.begin_level();
  t.add_child(2, 4);
  EXPECT_THROW(t.add_child(1, 5), Error);  // parent 1 after parent 2
  EXPECT_THROW(t.add_child(0, 5), Error);  // not in the level above
}

// Proves the node count of the ABI's bound: 1 + b + b^2 + ... then chains.
TEST(DraftTree, MaxNodes) {
  EXPECT_EQ(max_tree_nodes(DraftTreeShape{1, 0}, 6), 7);
  EXPECT_EQ(max_tree_nodes(DraftTreeShape{2, 2}, 6), 1 + 2 + 4 * 5);
  EXPECT_EQ(max_tree_nodes(DraftTreeShape{3, 1}, 4), 1 + 3 * 4);
  EXPECT_EQ(max_tree_nodes(DraftTreeShape{2, 6}, 6), 127);
  EXPECT_GT(max_tree_nodes(DraftTreeShape{8, 32}, 32), kMaxTreeNodes);  // no overflow
}

// Proves greedy acceptance walks the children that match the target's
// argmax, stops with the target's token at the first node without one, and
// ends with the bonus after a leaf.
TEST(AcceptTreeGreedy, LongestMatchingPath) {
  const DraftTree t = small_tree();
  TreeAcceptResult r;
  // Second branch, then its only child matches, then the bonus.
  accept_tree_greedy(
      t, [](int32_t node) { return node == 0   ? 21
                                   : node == 2 ? 32
                                               : 99; }, &r);
  EXPECT_EQ(r.path, (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{21, 32, 99}));
  // The deepest path to the leaf, then the bonus.
  accept_tree_greedy(
      t, [](int32_t node) { return std::vector<int32_t>{20, 30, 0, 40, 0, 0, 77}[node]; }, &r);
  EXPECT_EQ(r.path, (std::vector<int32_t>{1, 3, 6}));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{20, 30, 40, 77}));
  // No child of the root matches: the correction alone.
  accept_tree_greedy(
      t, [](int32_t) { return 5; }, &r);
  EXPECT_TRUE(r.path.empty());
  EXPECT_EQ(r.tokens, std::vector<int32_t>{5});
}

// Proves draws without replacement are distinct, from q's support, fewer when
// the support is small, and renormalise what is left.
TEST(TreeDraws, WithoutReplacement) {
  const TokenDistribution q = dist({1, 4, 7}, {0.5f, 0.3f, 0.2f});
  TokenDistribution rest;
  distribution_without(q, {4}, &rest);
  EXPECT_EQ(rest.ids, (std::vector<int32_t>{1, 7}));
  EXPECT_NEAR(rest.probs[0], 0.5 / 0.7, 1e-6);
  EXPECT_NEAR(rest.probs[1], 0.2 / 0.7, 1e-6);
  for (uint64_t seed = 0; seed < 100; ++seed) {
    Rng rng(seed);
    const std::vector<int32_t> d = draw_without_replacement(q, 5, rng);
    ASSERT_EQ(d.size(), 3u);
    EXPECT_NE(d[0], d[1]);
    EXPECT_NE(d[1], d[2]);
    EXPECT_NE(d[0], d[2]);
    EXPECT_EQ(rng.counter(), 3u);
  }
}

// Proves a tree of one branch per node is the chain rule (accept_sampled)
// draw for draw: same tokens, same RNG draws used.
TEST(AcceptTreeSampled, OneBranchIsTheChainRule) {
  const TokenDistribution q = dist({0, 1, 2}, {0.6f, 0.3f, 0.1f});
  const TokenDistribution p = dist({0, 1, 2, 3}, {0.2f, 0.3f, 0.4f, 0.1f});
  for (uint64_t seed = 0; seed < 500; ++seed) {
    Rng draft(seed);
    DraftTree t(9);
    std::vector<int32_t> drafts;
    for (int32_t j = 0; j < 3; ++j) {
      drafts.push_back(sample_from(q, draft.uniform()));
      t.begin_level();
      t.add_child(j, drafts.back());
    }
    const std::vector<TokenDistribution> qs(3, q);
    const TokenDistribution ps[] = {p, p, p, p};
    Rng a(seed + 7), b(seed + 7);
    AcceptResult chain;
    TreeAcceptResult tree;
    accept_sampled(drafts.data(), qs.data(), 3, ps, a, &chain);
    accept_tree_sampled(
        t, qs, [&](int32_t) -> const TokenDistribution & { return p; }, b, &tree);
    ASSERT_EQ(chain.tokens, tree.tokens) << "seed " << seed;
    ASSERT_EQ(chain.n_accepted, tree.n_accepted());
    ASSERT_EQ(a.counter(), b.counter());
  }
}

// Proves a draft outside the distribution it was said to be drawn from, or a
// node with children and no q, is an error, not a silent acceptance.
TEST(AcceptTreeSampled, BadDraftsAreErrors) {
  DraftTree t(0);
  t.begin_level();
  t.add_child(0, 5);
  const TokenDistribution p = dist({5}, {1.0f});
  Rng rng(1);
  TreeAcceptResult r;
  auto target = [&](int32_t) -> const TokenDistribution & { return p; };
  EXPECT_THROW(accept_tree_sampled(t, {dist({4}, {1.0f})}, target, rng, &r), Error);
  EXPECT_THROW(accept_tree_sampled(t, {}, target, rng, &r), Error);
}

// ---------------------------------------------------------------- losslessness
//
// The Markov model of markov_model.h. Each round drafts a tree from the last committed token: two
// draws without replacement at each of the first two levels, then a chain, 3 levels deep. The first
// two committed tokens must follow y1 ~ P[0], y2 ~ P[y1].

using test::MarkovModel;
constexpr int32_t kVocab = test::kMarkovVocab;
constexpr int kTrials = 200000;

struct Committed : test::MarkovCounts {
  int64_t second_sibling = 0;  // rounds whose path took a node's second child
  std::vector<int64_t> n_accepted = std::vector<int64_t>(4, 0);
};

// The tree rule with a plausible mistake: later siblings tested against q
// itself instead of q without the siblings rejected before them (the rule
// for draws with replacement, wrong for distinct drafts).
void accept_tree_siblings_against_q(const DraftTree &t, const std::vector<TokenDistribution> &q,
                                    const MarkovModel &m, Rng &rng, TreeAcceptResult *out) {
  out->path.clear();
  out->tokens.clear();
  for (int32_t node = 0;;) {
    TokenDistribution p = m.target[t.token(node)], residual;
    int32_t next = -1;
    for (int32_t c = t.first_child(node); c < t.first_child(node) + t.n_children(node); ++c) {
      const TokenDistribution &qn = q[node];
      if (rng.uniform() * qn.prob_of(t.token(c)) < p.prob_of(t.token(c))) {
        next = c;
        break;
      }
      residual_distribution(p, qn, &residual);
      if (!residual.ids.empty()) p = residual;
    }
    if (next < 0) {
      out->tokens.push_back(sample_from(p, rng.uniform()));
      return;
    }
    out->path.push_back(next);
    out->tokens.push_back(t.token(next));
    node = next;
  }
}

enum class TreeRule { kLossless, kBrokenResidual, kSiblingsAgainstQ };

Committed simulate(const MarkovModel &m, TreeRule rule) {
  const DraftTreeShape shape{2, 2};
  Committed c;
  std::vector<int32_t> committed;
  std::vector<TokenDistribution> q;
  TreeAcceptResult r;
  for (int trial = 0; trial < kTrials; ++trial) {
    Rng rng(0x7ee00000ULL + static_cast<uint64_t>(trial));
    committed.clear();
    int32_t prev = 0;
    while (committed.size() < 2) {
      DraftTree t(prev);
      q.clear();
      for (int32_t level = 0; level < 3; ++level) {
        const int32_t begin = t.level_begin(level), end = t.level_end(level);
        std::vector<std::vector<int32_t>> children;
        for (int32_t node = begin; node < end; ++node) {
          q.push_back(m.draft[t.token(node)]);
          children.push_back(draw_without_replacement(q.back(), shape.children_at(level), rng));
        }
        t.begin_level();
        for (int32_t node = begin; node < end; ++node)
          for (int32_t token : children[node - begin]) t.add_child(node, token);
      }
      if (rule == TreeRule::kSiblingsAgainstQ)
        accept_tree_siblings_against_q(t, q, m, rng, &r);
      else
        accept_tree_sampled(
            t, q,
            [&](int32_t node) -> const TokenDistribution & { return m.target[t.token(node)]; }, rng,
            &r,
            rule == TreeRule::kLossless ? ResidualRule::kLossless
                                        : ResidualRule::kBrokenFromTarget);
      ++c.n_accepted[r.n_accepted()];
      for (int32_t node : r.path) c.second_sibling += node != t.first_child(t.parent(node));
      committed.insert(committed.end(), r.tokens.begin(), r.tokens.end());
      prev = committed.back();
    }
    ++c.first[committed[0]];
    ++c.pairs[committed[0] * kVocab + committed[1]];
  }
  return c;
}

// Proves losslessness on trees: over 200K seeded trials the first and the
// first two committed tokens follow the target (chi-square, alpha 1e-3,
// deterministic seeds), no forbidden token is committed, and the rounds
// really take second siblings and every path length.
TEST(AcceptTreeSampledLossless, CommittedTokensFollowTheTarget) {
  const MarkovModel m = test::make_markov_model();
  const Committed c = simulate(m, TreeRule::kLossless);
  for (int32_t k = 0; k <= 3; ++k) {
    std::printf("rounds accepting %d drafts: %lld\n", k, static_cast<long long>(c.n_accepted[k]));
    EXPECT_GT(c.n_accepted[k], 1000);
  }
  std::printf("accepted second siblings: %lld\n", static_cast<long long>(c.second_sibling));
  EXPECT_GT(c.second_sibling, 10000);
  const test::MarkovVerdict v = test::judge_markov(m, c);
  std::printf("tree rule: first chi2 %.2f (df %d, p %.3g); pairs chi2 %.2f (df %d, p %.3g)\n",
              v.first.statistic, v.first.df, v.first.p_value, v.pairs.statistic, v.pairs.df,
              v.pairs.p_value);
  EXPECT_EQ(v.first.impossible_hits, 0);
  EXPECT_EQ(v.pairs.impossible_hits, 0);
  EXPECT_GT(v.first.p_value, kAlpha);
  EXPECT_GT(v.pairs.p_value, kAlpha);
}

// Proves the statistic has power on trees: drawing after rejections from p
// instead of the residuals, or testing later siblings against q itself, is
// detected at the same alpha.
TEST(AcceptTreeSampledLossless, StatisticDetectsBrokenRules) {
  const MarkovModel m = test::make_markov_model();
  for (TreeRule rule : {TreeRule::kBrokenResidual, TreeRule::kSiblingsAgainstQ}) {
    const test::MarkovVerdict v = test::judge_markov(m, simulate(m, rule));
    std::printf("broken rule %d: first chi2 %.1f (p %.3g); pairs chi2 %.1f (p %.3g)\n",
                static_cast<int>(rule), v.first.statistic, v.first.p_value, v.pairs.statistic,
                v.pairs.p_value);
    EXPECT_LT(v.pairs.p_value, kAlpha) << "rule " << static_cast<int>(rule) << " not detected";
  }
}

}  // namespace
}  // namespace vegas
