// HeldPageTables (backend/held_page_tables.h): a step reuses a batch index's
// page table only where the step before staged the same entries at the same
// offset, checked at least as far, and uploaded them.
#include <gtest/gtest.h>

#include <vector>

#include "backend/held_page_tables.h"

namespace vegas {
namespace {

TEST(HeldPageTables, AStagedAndUploadedTableIsHeldByTheNextStep) {
  HeldPageTables t;
  const std::vector<int32_t> table = {7, 8, 9, 10};
  std::vector<int32_t> buffer(16, -1);  // the staging buffer; batch index 0 at offset 4
  std::copy(table.begin(), table.end(), buffer.begin() + 4);
  t.begin_step();
  EXPECT_FALSE(t.held(0, 4, 4, table.data(), buffer.data() + 4));  // nothing uploaded yet
  t.stage(4, 4);
  t.uploaded();
  t.begin_step();
  EXPECT_TRUE(t.held(0, 4, 4, table.data(), buffer.data() + 4));
  EXPECT_TRUE(t.held(0, 4, 3, table.data(), buffer.data() + 4));   // fewer entries needed
  EXPECT_FALSE(t.held(0, 4, 5, table.data(), buffer.data() + 4));  // checked only 4 far
  EXPECT_FALSE(t.held(0, 8, 4, table.data(), buffer.data() + 8));  // another offset
  EXPECT_FALSE(t.held(1, 4, 4, table.data(), buffer.data() + 4));  // another batch index
  const std::vector<int32_t> moved = {7, 8, 11, 10};               // a page replaced
  EXPECT_FALSE(t.held(0, 4, 4, moved.data(), buffer.data() + 4));
}

TEST(HeldPageTables, OnlyWhatTheLastUploadedStepStagedIsHeld) {
  HeldPageTables t;
  const std::vector<int32_t> table = {1, 2};
  t.begin_step();
  t.stage(0, 2);
  t.uploaded();
  t.begin_step();
  ASSERT_TRUE(t.held(0, 0, 2, table.data(), table.data()));
  t.keep(0);  // this step reuses it, then fails before its upload
  t.begin_step();
  EXPECT_FALSE(t.held(0, 0, 2, table.data(), table.data()));
  // A kept table passes on to the step after an upload.
  t.begin_step();
  t.stage(0, 2);
  t.uploaded();
  t.begin_step();
  t.keep(0);
  t.uploaded();
  t.begin_step();
  EXPECT_TRUE(t.held(0, 0, 2, table.data(), table.data()));
  // Reallocated staging buffers hold nothing.
  t.stage(0, 2);
  t.uploaded();
  t.forget();
  t.begin_step();
  EXPECT_FALSE(t.held(0, 0, 2, table.data(), table.data()));
}

}  // namespace
}  // namespace vegas
