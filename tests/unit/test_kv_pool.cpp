// KvPool: page bookkeeping of the paged KV cache.
#include <gtest/gtest.h>

#include <algorithm>
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

}  // namespace
}  // namespace vegas
