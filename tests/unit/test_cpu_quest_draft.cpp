// Quest drafting on the CPU backend (backend.h: QuestDraft): the per-layer
// page selection against a brute force in double and against the quest
// policy's select() on the same query, the cached page bounds following K
// writes, and on the embedded model that a quest draft row attends to exactly
// the sets it reports (its logits equal a forward with those sets given as a
// plain sparse set), to everything with a budget >= prefix, and that bad
// quest rows are refused; and a quest session decodes as a vanilla one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_context.h"
#include "backend/cpu/cpu_quest.h"
#include "common/error.h"
#include "model/model.h"
#include "model/model_config.h"
#include "select/quest_pages.h"
#include "select/select_policy.h"
#include "session/session.h"
#include "speculative_test_data.h"
#include "support/session_run.h"

namespace vegas {
namespace {

// A pool of K for n_layers layers and sequences whose page tables are shuffled.
struct Pool {
  QuestShape shape;
  int32_t num_pages;
  std::vector<std::vector<float>> k;  // [layer][slots * kv_dim]
  Pool(const QuestShape &s, int32_t pages, uint32_t seed) : shape(s), num_pages(pages) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    k.resize(static_cast<size_t>(s.n_layers));
    for (auto &layer : k) {
      layer.resize(static_cast<size_t>(int64_t{pages} * s.page_size * s.kv_dim()));
      for (float &v : layer) v = u(rng);
    }
  }
  const float *key(int layer, const std::vector<int32_t> &table, int32_t pos, int32_t h) const {
    const int64_t slot =
        int64_t{table[static_cast<size_t>(pos / shape.page_size)]} * shape.page_size +
        pos % shape.page_size;
    return k[static_cast<size_t>(layer)].data() + slot * shape.kv_dim() +
           int64_t{h} * shape.head_dim;
  }
};

// Page scores in double straight from the keys: sum over query heads and dims
// of max(q * min, q * max) over the page's keys of the head's KV head.
std::vector<double> brute_scores(const Pool &pool, int layer, const std::vector<int32_t> &table,
                                 int32_t n, const float *q, double *magnitude) {
  const QuestShape &s = pool.shape;
  const int32_t group = s.n_heads / s.n_kv_heads;
  const int32_t pages = (n + s.page_size - 1) / s.page_size;
  std::vector<double> out(static_cast<size_t>(pages), 0.0);
  *magnitude = 0;
  for (int32_t page = 0; page < pages; ++page)
    for (int32_t h = 0; h < s.n_heads; ++h)
      for (int32_t d = 0; d < s.head_dim; ++d) {
        double lo = 1e300, hi = -1e300;
        for (int32_t pos = page * s.page_size; pos < std::min(n, (page + 1) * s.page_size); ++pos) {
          lo = std::min<double>(lo, pool.key(layer, table, pos, h / group)[d]);
          hi = std::max<double>(hi, pool.key(layer, table, pos, h / group)[d]);
        }
        const double qd = q[h * s.head_dim + d];
        out[static_cast<size_t>(page)] += std::max(qd * lo, qd * hi);
        *magnitude = std::max(*magnitude, std::fabs(qd) * std::max(std::fabs(lo), std::fabs(hi)));
      }
  *magnitude *= s.n_heads * s.head_dim;
  return out;
}

// The pages taken: best first (ties: later page), while their tokens fit.
std::vector<char> brute_take(const std::vector<double> &scores, int32_t n, int32_t ps,
                             int32_t budget) {
  std::vector<int32_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return scores[a] != scores[b] ? scores[a] > scores[b] : a > b;
  });
  std::vector<char> taken(scores.size(), 0);
  int64_t tokens = 0;
  for (int32_t page : order) {
    const int32_t size = std::min(ps, n - page * ps);
    if (tokens + size > budget) break;
    tokens += size;
    taken[static_cast<size_t>(page)] = 1;
  }
  return taken;
}

std::vector<int32_t> positions_of(const std::vector<char> &taken, int32_t n, int32_t ps) {
  std::vector<int32_t> out;
  for (int32_t pos = 0; pos < n; ++pos)
    if (taken[static_cast<size_t>(pos / ps)]) out.push_back(pos);
  return out;
}

// The quest policy's select() on the same query, with bounds over the
// sequence's pages computed by quest_pages.h from the paged keys.
std::vector<int32_t> policy_select(const Pool &pool, int layer, const std::vector<int32_t> &table,
                                   int32_t n, const float *q, float ratio, int32_t min_tokens,
                                   int32_t *budget) {
  const QuestShape &s = pool.shape;
  SelectionShape shape;
  shape.max_candidates = 1 << 16;
  shape.n_heads = s.n_heads;
  shape.n_kv_heads = s.n_kv_heads;
  shape.head_dim = s.head_dim;
  SelectionOptions options;
  options.ratio = ratio;
  options.min_tokens = min_tokens;
  options.quest_page_size = s.page_size;
  auto policy = make_selection_policy("quest", options, shape);
  QueryAwarePlan plan;
  EXPECT_TRUE(policy->query_aware_plan(n, &plan));
  EXPECT_EQ(plan.page_size, s.page_size);
  *budget = plan.budget;
  const int32_t pages = (n + s.page_size - 1) / s.page_size;
  std::vector<float> mn(static_cast<size_t>(std::max(pages, 1) * s.kv_dim())), mx(mn.size());
  PagedKeys keys;
  keys.k_cache = pool.k[static_cast<size_t>(layer)].data();
  keys.page_table = table.data();
  keys.kv_page_size = s.page_size;
  keys.n_kv_heads = s.n_kv_heads;
  keys.head_dim = s.head_dim;
  compute_key_bounds(keys, n, s.page_size, 0, pages, mn.data(), mx.data());
  SelectInput in;
  in.n = n;
  in.query = q;
  in.pages.key_min = mn.data();
  in.pages.key_max = mx.data();
  in.pages.n_pages = pages;
  std::vector<int32_t> out(static_cast<size_t>(std::max(n, 1)));
  out.resize(static_cast<size_t>(policy->select(in, out.data(), std::max(n, 1))));
  return out;
}

// Proves, for page sizes 4 and 16, prefixes with and without a partial last
// page, budgets from 0 to everything and three sequences selected together:
// each layer's set is exactly what the quest policy's select() chooses, and
// it is the brute-force choice (double scores straight from the keys) up to
// near ties, which must then respect the ranking within rounding.
TEST(CpuQuestSelect, MatchesPolicyAndBruteForce) {
  int32_t ties = 0, checked = 0;
  for (int32_t ps : {4, 16}) {
    QuestShape shape;
    shape.n_layers = 2;
    shape.n_heads = 8;
    shape.n_kv_heads = 2;
    shape.head_dim = 16;
    shape.page_size = ps;
    for (uint32_t seed = 0; seed < 12; ++seed) {
      const int32_t num_pages = 2400 / ps;
      const Pool pool(shape, num_pages, seed);
      CpuKeyBounds bounds;
      bounds.allocate(shape, num_pages);
      std::vector<int32_t> all(static_cast<size_t>(num_pages));
      std::iota(all.begin(), all.end(), 0);
      for (int layer = 0; layer < shape.n_layers; ++layer)
        bounds.update(layer, pool.k[static_cast<size_t>(layer)].data(), all, 2);
      std::mt19937 rng(seed + 100);
      std::shuffle(all.begin(), all.end(), rng);
      // Three sequences: pages from the shuffled pool, lengths with a partial page or not.
      const int32_t lengths[3] = {1 + 37 * static_cast<int32_t>(seed) % 700,
                                  ps * (3 + static_cast<int32_t>(seed)),
                                  257 + static_cast<int32_t>(seed)};
      const float ratios[3] = {0.15f, 0.0f, seed % 3 == 0 ? 1.0f : 0.3f};
      const int32_t mins[3] = {0, 5, 0};
      std::vector<std::vector<int32_t>> tables(3);
      std::vector<int32_t> tokens(3, 0);
      std::vector<QuestDraft> drafts(3);
      ForwardBatch batch;
      size_t next_page = 0;
      std::uniform_real_distribution<float> u(-1.5f, 1.5f);
      std::vector<float> q(static_cast<size_t>(3 * shape.n_heads * shape.head_dim));
      for (float &v : q) v = u(rng);
      std::vector<int32_t> budgets(3);
      for (int i = 0; i < 3; ++i) {
        const int32_t n = lengths[i];
        tables[static_cast<size_t>(i)].assign(
            all.begin() + static_cast<int64_t>(next_page),
            all.begin() + static_cast<int64_t>(next_page) + n / ps + 1);
        next_page += static_cast<size_t>(n / ps + 1);
        int32_t budget = 0;
        policy_select(pool, 0, tables[static_cast<size_t>(i)], n, q.data(), ratios[i], mins[i],
                      &budget);
        budgets[static_cast<size_t>(i)] = budget;
        drafts[static_cast<size_t>(i)].prefix = n;
        drafts[static_cast<size_t>(i)].budget = budget;
        SeqRows r;
        r.tokens = &tokens[static_cast<size_t>(i)];
        r.n_tokens = 1;
        r.start_pos = n;
        r.page_table = tables[static_cast<size_t>(i)].data();
        r.n_pages = static_cast<int32_t>(tables[static_cast<size_t>(i)].size());
        r.quest = &drafts[static_cast<size_t>(i)];
        batch.seqs.push_back(r);
      }
      CpuQuestRows rows;
      rows.prepare(batch, shape);
      ASSERT_EQ(rows.size(), 3u);
      for (int layer = 0; layer < shape.n_layers; ++layer) {
        rows.select_layer(layer, q.data(), pool.k[static_cast<size_t>(layer)].data(), bounds, 2);
        for (int i = 0; i < 3; ++i) {
          const SparseAttention &set = rows.set(static_cast<size_t>(i));
          const int32_t n = lengths[i];
          const float *qi = q.data() + i * shape.n_heads * shape.head_dim;
          const std::vector<int32_t> got(
              set.positions + int64_t{layer} * set.stride,
              set.positions + int64_t{layer} * set.stride + set.counts[layer]);
          const std::string where = "ps " + std::to_string(ps) + " seed " + std::to_string(seed) +
                                    " seq " + std::to_string(i) + " layer " + std::to_string(layer);
          ASSERT_EQ(set.prefix, n) << where;
          int32_t budget = 0;
          EXPECT_EQ(got, policy_select(pool, layer, tables[static_cast<size_t>(i)], n, qi,
                                       ratios[i], mins[i], &budget))
              << where;
          EXPECT_LE(static_cast<int32_t>(got.size()), budget) << where;
          double magnitude = 0;
          const std::vector<double> scores =
              brute_scores(pool, layer, tables[static_cast<size_t>(i)], n, qi, &magnitude);
          const std::vector<int32_t> want = positions_of(brute_take(scores, n, ps, budget), n, ps);
          ++checked;
          if (got == want) continue;
          // A near tie: no page left out may outscore a chosen one beyond rounding.
          ++ties;
          std::vector<char> chosen(scores.size(), 0);
          for (int32_t pos : got) chosen[static_cast<size_t>(pos / ps)] = 1;
          double worst_chosen = 1e300, best_other = -1e300;
          for (size_t p = 0; p < scores.size(); ++p) {
            if (chosen[p]) {
              worst_chosen = std::min(worst_chosen, scores[p]);
            } else {
              best_other = std::max(best_other, scores[p]);
            }
          }
          EXPECT_GE(worst_chosen, best_other - 1e-5 * magnitude) << where;
        }
      }
    }
  }
  std::printf("[quest] CPU selection: %d sets checked, %d brute-force near ties\n", checked, ties);
  EXPECT_LE(ties, checked / 20) << "too many near ties for random data";
}

// Proves the cached bounds follow K writes: after a page's keys are rewritten
// to outscore every other page and only that page is re-bounded, the
// selection takes it; without re-bounding (stale bounds) it does not.
TEST(CpuQuestSelect, BoundsFollowWrites) {
  QuestShape shape;
  shape.n_layers = 1;
  shape.n_heads = 4;
  shape.n_kv_heads = 1;
  shape.head_dim = 8;
  shape.page_size = 8;
  Pool pool(shape, 16, 5);
  CpuKeyBounds bounds;
  bounds.allocate(shape, 16);
  std::vector<int32_t> all(16);
  std::iota(all.begin(), all.end(), 0);
  bounds.update(0, pool.k[0].data(), all, 1);
  const std::vector<int32_t> table = {9, 3, 12, 0, 7, 1, 14, 2};  // 64 tokens
  std::vector<float> q(static_cast<size_t>(shape.n_heads * shape.head_dim), 1.0f);
  QuestDraft draft;
  draft.prefix = 64;
  draft.budget = 8;  // one page
  int32_t token = 0;
  SeqRows r;
  r.tokens = &token;
  r.n_tokens = 1;
  r.start_pos = 64;
  r.page_table = table.data();
  r.n_pages = 8;
  r.quest = &draft;
  ForwardBatch batch;
  batch.seqs.push_back(r);
  CpuQuestRows rows;
  rows.prepare(batch, shape);
  auto chosen_page = [&] {
    rows.select_layer(0, q.data(), pool.k[0].data(), bounds, 1);
    const SparseAttention &set = rows.set(0);
    EXPECT_EQ(set.counts[0], 8);
    return set.positions[0] / 8;
  };
  const int32_t before = chosen_page();
  const int32_t target = before == 2 ? 5 : 2;  // sequence page 2 or 5
  float *page_keys = pool.k[0].data() + int64_t{table[target]} * 8 * shape.kv_dim();
  std::fill(page_keys, page_keys + 8 * shape.kv_dim(), 50.0f);
  EXPECT_EQ(chosen_page(), before) << "stale bounds cannot see the write";
  bounds.update(0, pool.k[0].data(), {table[target]}, 1);
  EXPECT_EQ(chosen_page(), target);
}

// ------------------------------------------------------------ embedded model

class EmbeddedQuest : public ::testing::Test {
 protected:
  static const ModelConfig &config() { return model().config(); }
  static Model &model() { return *test::shared_cpu_model(test::embedded_model_dir()); }

  // A context holding a random 300-token prefix in shuffled pages of 16.
  void SetUp() override {
    ContextParams p;
    p.num_pages = 40;
    p.page_size = 16;
    p.max_rows = 512;
    p.key_bounds = true;
    ctx_ = model().backend().create_context(p);
    std::mt19937 rng(17);
    std::uniform_int_distribution<int32_t> u(0, config().vocab_size - 1);
    tokens_.resize(kPrefix + 1);
    for (int32_t &t : tokens_) t = u(rng);
    table_.resize(40);
    std::iota(table_.begin(), table_.end(), 0);
    std::shuffle(table_.begin(), table_.end(), rng);
    table_.resize(20);  // 320 slots
    ForwardBatch prefill;
    prefill.seqs.push_back(rows(0, kPrefix));
    prefill.seqs[0].logits = SeqRows::Logits::kNone;
    ctx_->forward(prefill);
  }

  SeqRows rows(int32_t from, int32_t to) const {
    SeqRows s;
    s.tokens = tokens_.data() + from;
    s.n_tokens = to - from;
    s.start_pos = from;
    s.page_table = table_.data();
    s.n_pages = static_cast<int32_t>(table_.size());
    s.logits = SeqRows::Logits::kLast;
    return s;
  }

  // Logits of the row at kPrefix drafted with `quest` or `sparse`.
  std::vector<float> draft(const QuestDraft *quest, const SparseAttention *sparse) {
    ForwardBatch b;
    b.seqs.push_back(rows(kPrefix, kPrefix + 1));
    b.seqs[0].quest = quest;
    b.seqs[0].sparse = sparse;
    const float *l = ctx_->forward(b);
    return std::vector<float>(l, l + config().vocab_size);
  }

  CpuContext &cpu() { return static_cast<CpuContext &>(*ctx_); }

  static constexpr int32_t kPrefix = 300;
  std::unique_ptr<BackendContext> ctx_;
  std::vector<int32_t> tokens_, table_;
};

// Proves a quest draft row attends to exactly the per-layer sets it reports
// (bitwise the logits of the same row drafted with those sets as a plain
// sparse set), that the sets are whole pages within the budget and differ
// between layers (each layer's own query chose), and that a budget >= prefix
// keeps everything (bitwise the dense row's logits).
TEST_F(EmbeddedQuest, DraftAttendsToTheReportedPages) {
  QuestDraft quest;
  quest.prefix = 290;  // a partial last page (290 = 18 * 16 + 2) and a tail [290, 300]
  quest.budget = 64;
  const std::vector<float> got = draft(&quest, nullptr);
  ASSERT_EQ(cpu().quest_rows(), 1u);
  const SparseAttention set = cpu().quest_set(0);
  std::vector<int32_t> positions(set.positions,
                                 set.positions + int64_t{config().n_layers} * set.stride);
  std::vector<int32_t> counts(set.counts, set.counts + config().n_layers);
  bool layers_differ = false;
  for (int32_t l = 0; l < config().n_layers; ++l) {
    const int32_t *p = positions.data() + int64_t{l} * set.stride;
    EXPECT_GT(counts[l], 64 - 16) << "layer " << l;
    EXPECT_LE(counts[l], 64) << "layer " << l;
    for (int32_t j = 0; j < counts[l]; ++j) {  // whole pages, ascending
      if (p[j] % 16 != 0) {
        ASSERT_TRUE(j > 0 && p[j] == p[j - 1] + 1) << "layer " << l;
      }
      if (p[j] < 288 && (j + 1 == counts[l] || p[j + 1] != p[j] + 1)) {
        EXPECT_EQ(p[j] % 16, 15) << "layer " << l << " ends a page early";
      }
    }
    if (l > 0 && !std::equal(p, p + counts[l], positions.data() + int64_t{l - 1} * set.stride))
      layers_differ = true;
  }
  EXPECT_TRUE(layers_differ) << "every layer chose the same pages";
  SparseAttention plain;
  plain.prefix = 290;
  plain.positions = positions.data();
  plain.counts = counts.data();
  plain.stride = set.stride;
  EXPECT_EQ(draft(nullptr, &plain), got);

  quest.budget = 290;
  const std::vector<float> everything = draft(&quest, nullptr);
  EXPECT_EQ(draft(nullptr, nullptr), everything);
  EXPECT_NE(everything, got);
}

// Proves bad quest rows are refused: a context without key bounds, two rows,
// a prefix after the row, a negative budget, a quest row with a sparse set.
TEST_F(EmbeddedQuest, BadQuestRowsAreRefused) {
  QuestDraft quest;
  quest.prefix = 290;
  quest.budget = 64;
  auto expect_invalid = [&](BackendContext &ctx, const SeqRows &r, const char *what) {
    ForwardBatch b;
    b.seqs.push_back(r);
    try {
      ctx.forward(b);
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error &e) {
      EXPECT_EQ(e.status(), VEGAS_ERR_INVALID_ARGUMENT) << what;
    }
  };
  ContextParams p;
  p.num_pages = 40;
  p.page_size = 16;
  auto plain = model().backend().create_context(p);
  SeqRows r = rows(kPrefix, kPrefix + 1);
  r.quest = &quest;
  expect_invalid(*plain, r, "no key bounds");
  SeqRows two = rows(kPrefix - 1, kPrefix + 1);
  two.quest = &quest;
  expect_invalid(*ctx_, two, "two rows");
  QuestDraft late = quest;
  late.prefix = kPrefix + 1;
  r.quest = &late;
  expect_invalid(*ctx_, r, "prefix after the row");
  QuestDraft negative = quest;
  negative.budget = -1;
  r.quest = &negative;
  expect_invalid(*ctx_, r, "negative budget");
  SparseAttention sparse;
  std::vector<int32_t> counts(static_cast<size_t>(config().n_layers), 0);
  sparse.prefix = 290;
  sparse.counts = counts.data();
  r.quest = &quest;
  r.sparse = &sparse;
  expect_invalid(*ctx_, r, "quest and a sparse set");
}

// Greedy tokens of a Session on the embedded model (policy empty: vanilla).
std::vector<int32_t> session_tokens(const std::shared_ptr<Model> &model,
                                    const std::vector<int32_t> &prompt, const std::string &policy,
                                    int32_t page_size, SequenceStats *stats) {
  SessionParams sp;
  sp.page_size = page_size;
  sp.kv_bytes = 16u << 20;
  sp.speculative = !policy.empty();
  sp.spec.policy = policy.empty() ? "vegas" : policy;
  sp.spec.selection.min_tokens = 64;
  return test::session_tokens(model, sp, prompt, 24, stats);
}

// Proves the session path: a VEGAS session with policy quest (its quest pages
// set to the session's KV page size, 8 here, and its context keeping key
// bounds) decodes greedily the tokens of a vanilla session, with drafts from
// a subset of the context (ratio 0.07, floor 64, of a 700-token prompt).
TEST(SessionQuest, GreedyEqualsVanilla) {
  const std::shared_ptr<Model> &model = test::shared_cpu_model(test::embedded_model_dir());
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> u(0, model->config().vocab_size - 1);
  std::vector<int32_t> prompt(700);
  for (int32_t &t : prompt) t = u(rng);
  SequenceStats stats;
  const std::vector<int32_t> quest = session_tokens(model, prompt, "quest", 8, &stats);
  EXPECT_EQ(quest, session_tokens(model, prompt, "", 8, nullptr));
  EXPECT_GT(stats.drafted, 0);
  std::printf("[quest] session: %lld rounds, %lld of %lld drafts accepted\n",
              static_cast<long long>(stats.rounds), static_cast<long long>(stats.accepted),
              static_cast<long long>(stats.drafted));
}

}  // namespace
}  // namespace vegas
