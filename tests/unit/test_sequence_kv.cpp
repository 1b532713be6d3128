// SequenceKv, the one writer of a sequence's KV state: what each entry point
// does to kv_len, the page table and the pool, and that advancing past the
// reserved slots or reserving past the pool is refused without corrupting it.
#include <gtest/gtest.h>

#include <functional>

#include "common/error.h"
#include "session/sequence_kv.h"

namespace vegas {
namespace {

constexpr int32_t kPageSize = 4;

Sequence make_sequence(int32_t n_prompt) {
  SequenceRequest req;
  for (int32_t i = 0; i < n_prompt; ++i) req.prompt.push_back(i + 1);
  return Sequence(0, std::move(req), nullptr);
}

vegas_status status_of(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.status();
  }
  return VEGAS_OK;
}

TEST(SequenceKv, ReserveAdvanceSettleRelease) {
  SequenceKv kv(8, kPageSize, /*prefix_cache=*/false);
  Sequence seq = make_sequence(10);
  kv.reserve(seq, 10);
  EXPECT_EQ(seq.page_table.size(), 3u);
  EXPECT_EQ(seq.kv_len, 0);
  kv.advance(seq, 10);
  EXPECT_EQ(seq.kv_len, 10);
  // A round reserves its drafts' slots ahead, then keeps 2 of 6.
  kv.reserve(seq, 10 + 7);
  EXPECT_EQ(seq.page_table.size(), 5u);
  kv.settle(seq, 10 + 1 + 2);
  EXPECT_EQ(seq.kv_len, 13);
  EXPECT_EQ(seq.page_table.size(), 4u);  // positions 0..13: the next token's slot stays
  EXPECT_EQ(kv.pool().free_pages(), 4);
  kv.release(seq);
  EXPECT_EQ(seq.kv_len, 0);
  EXPECT_TRUE(seq.page_table.empty());
  EXPECT_EQ(kv.pool().free_pages(), 8);
}

TEST(SequenceKv, RefusesWhatWasNotReservedOrDoesNotFit) {
  SequenceKv kv(2, kPageSize, /*prefix_cache=*/false);
  Sequence seq = make_sequence(6);
  kv.reserve(seq, 6);
  EXPECT_EQ(status_of([&] { kv.advance(seq, 9); }), VEGAS_ERR_INTERNAL);
  EXPECT_EQ(seq.kv_len, 0);
  EXPECT_EQ(status_of([&] { kv.advance(seq, -1); }), VEGAS_ERR_INTERNAL);
  EXPECT_EQ(status_of([&] { kv.reserve(seq, 9); }), VEGAS_ERR_KV_FULL);
  kv.advance(seq, 6);
  EXPECT_EQ(seq.kv_len, 6);
  kv.release(seq);
  EXPECT_EQ(kv.pool().free_pages(), 2);
}

}  // namespace
}  // namespace vegas
