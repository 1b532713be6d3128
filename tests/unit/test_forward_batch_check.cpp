// The page-table checks of forward_batch_check.h that a backend keeping
// checked tables relies on (the CUDA context holds a table's entries up to
// valid_page_entries and skips checking and uploading them again).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/forward_batch_check.h"
#include "common/error.h"

namespace vegas {
namespace {

ContextParams pool_of(int32_t num_pages, int32_t page_size) {
  ContextParams p;
  p.num_pages = num_pages;
  p.page_size = page_size;
  return p;
}

// Positions [0, 33) at 16 slots a page read three entries; the valid ones
// after them (reserved ahead) count up to the first entry outside the pool,
// and never past n_pages.
TEST(ForwardBatchCheck, ValidEntriesExtendPastTheNeededOnesToTheFirstBadOne) {
  const ContextParams params = pool_of(8, 16);
  const std::vector<int32_t> table = {3, 1, 7, 0, 5, 8, 2};
  const int32_t token = 0;
  SeqRows s;
  s.tokens = &token;
  s.n_tokens = 1;
  s.start_pos = 32;
  s.page_table = table.data();
  s.n_pages = 7;
  EXPECT_EQ(pages_needed(s, params), 3);
  EXPECT_EQ(valid_page_entries(s, params), 5);  // entry 5 names page 8 of a pool of 8
  s.n_pages = 4;
  EXPECT_EQ(valid_page_entries(s, params), 4);  // stops at n_pages
  s.n_pages = 3;
  EXPECT_EQ(valid_page_entries(s, params), 3);  // nothing reserved ahead
}

// A bad entry among the needed ones is an INVALID_ARGUMENT naming it; one
// past them (not read by the rows) is not an error.
TEST(ForwardBatchCheck, BadNeededEntryIsRefusedAndALaterOneIsNot) {
  const ContextParams params = pool_of(8, 16);
  std::vector<int32_t> table = {3, -1, 7, 9};
  const int32_t token = 0;
  ForwardBatch batch;
  batch.seqs.resize(1);
  SeqRows &s = batch.seqs[0];
  s.tokens = &token;
  s.n_tokens = 1;
  s.start_pos = 40;  // entries 0..2
  s.page_table = table.data();
  s.n_pages = 4;
  try {
    check_page_entries(batch, 0, params);
    FAIL() << "entry 1 names page -1";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("page table entry 1"), std::string::npos) << e.what();
  }
  table[1] = 2;
  EXPECT_NO_THROW(check_page_entries(batch, 0, params));  // entry 3 (page 9) is not read
  EXPECT_EQ(valid_page_entries(s, params), 3);
}

}  // namespace
}  // namespace vegas
