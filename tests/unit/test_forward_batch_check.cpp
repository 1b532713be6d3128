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

// What a token tree's rows must be (backend.h: TokenTree), each fault an
// INVALID_ARGUMENT naming it: a valid tree passes; a parent after its child,
// a root with a parent, rows outside the tree's slots, a sparse prefix past
// the tree's base, capture candidates past the root, and quest drafting are
// refused.
TEST(ForwardBatchCheck, TokenTreeFaultsAreRefused) {
  ContextParams params = pool_of(8, 16);
  params.max_rows = 64;
  params.key_bounds = true;
  ModelConfig config;
  config.vocab_size = 100;
  config.n_layers = 1;
  const std::vector<int32_t> table = {0, 1, 2, 3};
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  std::vector<int32_t> parents = {-1, 0, 0, 1};
  TokenTree tree{20, parents.data(), 4};
  auto batch_of = [&](int32_t start, int32_t n) {
    ForwardBatch b;
    SeqRows r;
    r.tokens = tokens.data();
    r.n_tokens = n;
    r.start_pos = start;
    r.page_table = table.data();
    r.n_pages = 4;
    r.tree = &tree;
    b.seqs.push_back(r);
    return b;
  };
  auto refused = [&](const ForwardBatch &b, const std::string &what) {
    try {
      check_forward_batch(b, config, params);
      ADD_FAILURE() << "not refused: " << what;
    } catch (const Error &e) {
      EXPECT_EQ(e.status(), VEGAS_ERR_INVALID_ARGUMENT) << what;
      EXPECT_NE(std::string(e.what()).find("tree"), std::string::npos) << e.what();
    }
  };
  EXPECT_NO_THROW(check_forward_batch(batch_of(20, 4), config, params));
  EXPECT_NO_THROW(check_forward_batch(batch_of(21, 2), config, params));  // one level
  refused(batch_of(19, 4), "rows before the base");
  refused(batch_of(22, 3), "rows past the last node");
  parents[2] = 3;
  refused(batch_of(20, 4), "parent after its child");
  parents[2] = 0;
  parents[0] = 0;
  refused(batch_of(20, 4), "root with a parent");
  parents[0] = -1;
  const int32_t positions[] = {0, 5};
  const int32_t counts[] = {2};
  SparseAttention sparse{21, positions, counts, 2};
  // Rows of level 1 (slots 21, 22): what a chain's rows there could see, a
  // tree's cannot.
  ForwardBatch b = batch_of(21, 2);
  b.seqs[0].sparse = &sparse;
  refused(b, "sparse prefix past the base");
  const int32_t rows[] = {1};
  float logits[32], lse[8];
  ScoreCapture capture{22, rows, 1, logits, lse};
  b = batch_of(21, 2);
  b.seqs[0].capture = &capture;
  refused(b, "capture past the root");
  QuestDraft quest{20, 16};
  b = batch_of(20, 1);
  b.seqs[0].quest = &quest;
  refused(b, "quest drafting");
}

}  // namespace
}  // namespace vegas
