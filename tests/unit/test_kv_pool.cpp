// KvPool: page bookkeeping of the paged KV cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "common/error.h"
#include "kv/kv_pool.h"

namespace vegas {
namespace {

// Proves reserve grows a table to exactly ceil(n / page_size) distinct pages
// and never shrinks it.
TEST(KvPool, ReserveCoversTokens) {
  KvPool pool(10, 4);
  std::vector<int32_t> table;
  pool.reserve(table, 1);
  EXPECT_EQ(table.size(), 1u);
  pool.reserve(table, 4);
  EXPECT_EQ(table.size(), 1u);
  pool.reserve(table, 9);
  EXPECT_EQ(table.size(), 3u);
  pool.reserve(table, 2);  // already covered: unchanged
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(pool.free_pages(), 7);
  std::set<int32_t> distinct(table.begin(), table.end());
  EXPECT_EQ(distinct.size(), 3u);
  for (int32_t p : table) {
    EXPECT_GE(p, 0);
    EXPECT_LT(p, 10);
  }
}

// Proves KV_FULL is thrown when too few pages are free, and that the table
// and the free count are then exactly as before.
TEST(KvPool, FullLeavesTableUnchanged) {
  KvPool pool(4, 16);
  std::vector<int32_t> a, b;
  pool.reserve(a, 40);  // 3 pages
  pool.reserve(b, 10);  // 1 page
  const std::vector<int32_t> before = b;
  try {
    pool.reserve(b, 17);  // needs a second page; none free
    FAIL() << "expected KV_FULL";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_KV_FULL);
    EXPECT_NE(std::string(e.what()).find("free"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b, before);
  EXPECT_EQ(pool.free_pages(), 0);
}

// Proves truncate frees exactly the pages past the kept tokens and that
// release frees all; freed pages are handed out again.
TEST(KvPool, TruncateReleaseAndReuse) {
  KvPool pool(6, 8);
  std::vector<int32_t> a;
  pool.reserve(a, 48);  // all 6 pages
  EXPECT_EQ(pool.free_pages(), 0);
  const std::vector<int32_t> full = a;
  pool.truncate(a, 17);  // 3 pages stay
  ASSERT_EQ(a.size(), 3u);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), full.begin()));
  EXPECT_EQ(pool.free_pages(), 3);
  pool.truncate(a, 100);  // never grows
  EXPECT_EQ(a.size(), 3u);

  std::vector<int32_t> b;
  pool.reserve(b, 24);  // takes the 3 freed pages
  std::vector<int32_t> freed(full.begin() + 3, full.end());
  std::vector<int32_t> got = b;
  std::sort(freed.begin(), freed.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, freed);
  EXPECT_EQ(pool.free_pages(), 0);

  pool.release(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(pool.free_pages(), 3);
  pool.release(b);
  EXPECT_EQ(pool.free_pages(), 6);
  // Everything can be taken again.
  std::vector<int32_t> c;
  pool.reserve(c, 48);
  std::set<int32_t> all(c.begin(), c.end());
  EXPECT_EQ(all.size(), 6u);
}

// Proves truncate to 0 and reserve of 0 are no-ops on an empty table and that
// bad arguments are INVALID_ARGUMENT, not corruption of the free stack.
TEST(KvPool, EdgeCasesAndBadInput) {
  KvPool pool(2, 4);
  std::vector<int32_t> t;
  pool.reserve(t, 0);
  EXPECT_TRUE(t.empty());
  pool.truncate(t, 0);
  EXPECT_EQ(pool.free_pages(), 2);
  EXPECT_EQ(pool.pages_for(0), 0);
  EXPECT_EQ(pool.pages_for(4), 1);
  EXPECT_EQ(pool.pages_for(5), 2);

  auto status_of = [](auto &&f) {
    try {
      f();
    } catch (const Error &e) {
      return e.status();
    }
    return VEGAS_OK;
  };
  EXPECT_EQ(status_of([&] { pool.reserve(t, -1); }), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([&] { pool.truncate(t, -1); }), VEGAS_ERR_INVALID_ARGUMENT);
  std::vector<int32_t> forged = {7};  // not a page of this pool
  EXPECT_EQ(status_of([&] { pool.release(forged); }), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pool.free_pages(), 2);
  EXPECT_EQ(status_of([] { KvPool bad(4, 0); }), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([] { KvPool bad(-1, 16); }), VEGAS_ERR_INVALID_ARGUMENT);
}

// ---------------------------------------------------------------- prefix cache

std::vector<int32_t> iota_tokens(int32_t n, int32_t from) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), from);
  return t;
}

// A table's full pages below its final tokens, published, serve a second
// table whose tokens start the same: the same pages, whole pages only, and
// only up to the first page that differs; with the cache off, nothing.
TEST(KvPoolPrefixCache, SharesThePublishedPrefixPageByPage) {
  KvPool pool(32, 4, true);
  std::vector<int32_t> a_tokens = iota_tokens(18, 100);  // 4 full pages + 2
  std::vector<int32_t> a;
  KvPool::PublishCursor ca;
  pool.reserve(a, 18);
  pool.publish(a, a_tokens.data(), 18, &ca);
  EXPECT_EQ(ca.pages, 4);

  std::vector<int32_t> b_tokens = a_tokens;
  b_tokens[13] = 7;  // page 3 differs
  std::vector<int32_t> b;
  KvPool::PublishCursor cb;
  EXPECT_EQ(pool.attach_prefix(b, b_tokens.data(), 16, &cb), 12);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_TRUE(std::equal(b.begin(), b.end(), a.begin()));
  EXPECT_EQ(cb.pages, 3);
  EXPECT_EQ(pool.hit_tokens(), 12);
  // At most max_tokens, whole pages: 11 tokens allow two pages.
  std::vector<int32_t> c;
  KvPool::PublishCursor cc;
  EXPECT_EQ(pool.attach_prefix(c, a_tokens.data(), 11, &cc), 8);

  KvPool off(32, 4, false);
  std::vector<int32_t> d, e;
  KvPool::PublishCursor cd, ce;
  off.reserve(d, 18);
  off.publish(d, a_tokens.data(), 18, &cd);
  EXPECT_EQ(off.attach_prefix(e, a_tokens.data(), 16, &ce), 0);
  EXPECT_TRUE(e.empty());
}

// A shared page goes back to the pool only when no table holds it, and stays
// cached (evictable) while published: a later table still finds it. Reserve
// takes free pages first, then the least recently released cached ones.
TEST(KvPoolPrefixCache, CachedPagesOutliveTheirTablesUntilNeeded) {
  KvPool pool(6, 4, true);
  const std::vector<int32_t> tokens = iota_tokens(8, 1);
  std::vector<int32_t> a, b;
  KvPool::PublishCursor ca, cb;
  pool.reserve(a, 9);  // 3 pages, 2 full ones published
  pool.publish(a, tokens.data(), 8, &ca);
  EXPECT_EQ(pool.attach_prefix(b, tokens.data(), 8, &cb), 8);
  pool.release(a);
  EXPECT_EQ(pool.free_pages(), 4);  // a's unpublished tail page came back; b holds two
  pool.release(b);
  EXPECT_EQ(pool.free_pages(), 6);  // 4 free + 2 cached
  std::vector<int32_t> c;
  KvPool::PublishCursor cc;
  EXPECT_EQ(pool.attach_prefix(c, tokens.data(), 8, &cc), 8);
  pool.release(c);
  std::vector<int32_t> big;
  pool.reserve(big, 16);  // the 4 free pages: nothing evicted
  EXPECT_EQ(pool.evicted_pages(), 0);
  std::vector<int32_t> more;
  pool.reserve(more, 4);  // one cached page taken back: the deeper one first
  EXPECT_EQ(pool.evicted_pages(), 1);
  std::vector<int32_t> d;
  KvPool::PublishCursor cd;
  EXPECT_EQ(pool.attach_prefix(d, tokens.data(), 8, &cd), 4);
  EXPECT_THROW(pool.reserve(more, 8), Error);  // d holds the last page
}

// Random tables over a small pool: reserve, publish, attach, truncate and
// release in any order never hand one page to two tables unless both hold
// it as the same published prefix page, never lose a page, and a table that
// attached a prefix sees exactly the pages published for those tokens.
TEST(KvPoolPrefixCache, RandomOperationsKeepEveryPageAccounted) {
  constexpr int32_t kPages = 24, kPageSize = 4;
  KvPool pool(kPages, kPageSize, true);
  std::mt19937 rng(7);
  struct Table {
    std::vector<int32_t> pages, tokens;
    KvPool::PublishCursor cursor;
    int32_t final_tokens = 0;
  };
  std::map<int, Table> tables;
  int next = 0;
  for (int step = 0; step < 20000; ++step) {
    const int op = static_cast<int>(rng() % 4);
    if (op == 0 || tables.empty()) {  // a new table, its tokens from a small alphabet
      Table t;
      const int32_t n = 2 + static_cast<int32_t>(rng() % 20);
      for (int32_t i = 0; i < n; ++i) t.tokens.push_back(static_cast<int32_t>(rng() % 2));
      t.final_tokens =
          static_cast<int32_t>(pool.attach_prefix(t.pages, t.tokens.data(), n - 1, &t.cursor));
      try {
        pool.reserve(t.pages, n);
      } catch (const Error &) {
        pool.release(t.pages);
        continue;
      }
      tables.emplace(next++, std::move(t));
    } else {
      auto it = tables.begin();
      std::advance(it, static_cast<long>(rng() % tables.size()));
      Table &t = it->second;
      if (op == 1) {  // its K/V become final up to some point, and are published
        t.final_tokens =
            std::max<int32_t>(t.final_tokens, static_cast<int32_t>(rng() % (t.tokens.size() + 1)));
        pool.publish(t.pages, t.tokens.data(), t.final_tokens, &t.cursor);
      } else if (op == 2) {  // a rejected draft: truncate above the final tokens
        pool.truncate(t.pages, std::max<int64_t>(t.final_tokens, int64_t{1}));
        t.tokens.resize(std::max<size_t>(t.final_tokens, 1));
      } else {
        pool.release(t.pages);
        tables.erase(it);
      }
    }
    // Every page is free, cached or held; shared pages hold the same tokens.
    std::map<int32_t, std::vector<int32_t>> content;
    int32_t held = 0;
    std::set<int32_t> distinct;
    for (const auto &entry : tables) {
      const Table &t = entry.second;
      for (size_t i = 0; i < t.pages.size(); ++i) {
        const int32_t page = t.pages[i];
        distinct.insert(page);
        ++held;
        std::vector<int32_t> page_tokens;
        for (size_t k = i * kPageSize; k < (i + 1) * kPageSize && k < t.tokens.size(); ++k)
          page_tokens.push_back(t.tokens[k]);
        auto [where, fresh] = content.emplace(page, page_tokens);
        if (!fresh) {  // shared: a full page, the same tokens in both tables
          ASSERT_EQ(where->second, page_tokens) << "step " << step << " page " << page;
          ASSERT_EQ(page_tokens.size(), static_cast<size_t>(kPageSize)) << "step " << step;
        }
      }
    }
    // Held pages, free ones and cached ones no table holds: every page, once.
    ASSERT_EQ(static_cast<int32_t>(distinct.size()) + pool.free_pages(), kPages) << "step " << step;
    (void)held;
  }
  EXPECT_GT(pool.hit_tokens(), 1000);  // the run shared and evicted pages, often
  EXPECT_GT(pool.evicted_pages(), 100);
}

}  // namespace
}  // namespace vegas
