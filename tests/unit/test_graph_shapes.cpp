// graph_shapes.h: which verification passes a GPU context replays as graphs,
// and how their rows and keys are padded (the CUDA staging's arithmetic,
// checked here without a GPU).
#include <gtest/gtest.h>

#include "backend/graph_shapes.h"

namespace vegas {
namespace {

// Without score capture (graph_verifies' `capture` false), as by default.
bool graph_verifies_plain(const SeqRows &s) {
  return graph_verifies(s, false);
}

SeqRows rows_of(int32_t n, SeqRows::Logits logits = SeqRows::Logits::kAll) {
  SeqRows r;
  r.n_tokens = n;
  r.logits = logits;
  return r;
}

// A dense verification of up to 16 rows with every row's logits qualifies,
// and a one-row decode row beside it; anything that captures, drafts sparse,
// draws a tree or wants other logits does not.
TEST(GraphShapes, OnlyDenseUncapturedVerificationRowsReplay) {
  using L = SeqRows::Logits;
  EXPECT_TRUE(graph_verifies_plain(rows_of(1)));
  EXPECT_TRUE(graph_verifies_plain(rows_of(7)));
  EXPECT_TRUE(graph_verifies_plain(rows_of(kGraphVerifyMaxRows)));
  EXPECT_FALSE(graph_verifies_plain(rows_of(kGraphVerifyMaxRows + 1)));
  EXPECT_FALSE(graph_verifies_plain(rows_of(0)));
  EXPECT_TRUE(graph_verifies_plain(rows_of(1, L::kLast)));
  EXPECT_FALSE(graph_verifies_plain(rows_of(2, L::kLast))) << "a prefill chunk's last row";
  EXPECT_FALSE(graph_verifies_plain(rows_of(1, L::kNone)));

  ScoreCapture capture;
  capture.n_rows = 1;
  SeqRows captured = rows_of(7);
  captured.capture = &capture;
  EXPECT_FALSE(graph_verifies_plain(captured)) << "capture graphs are opted in apart";
  EXPECT_TRUE(graph_verifies(captured, true));
  capture.n_rows = 0;
  EXPECT_TRUE(graph_verifies_plain(captured)) << "a capture of no rows captures nothing";

  SeqRows device_sparse = rows_of(1);
  device_sparse.device_sparse_key = 3;
  EXPECT_FALSE(graph_verifies_plain(device_sparse));
  SparseAttention sparse;
  SeqRows host_sparse = rows_of(1);
  host_sparse.sparse = &sparse;
  EXPECT_FALSE(graph_verifies_plain(host_sparse));
  QuestDraft quest;
  SeqRows quest_rows = rows_of(1);
  quest_rows.quest = &quest;
  EXPECT_FALSE(graph_verifies_plain(quest_rows));
  TokenTree tree;
  SeqRows tree_rows = rows_of(3);
  tree_rows.tree = &tree;
  EXPECT_FALSE(graph_verifies_plain(tree_rows));
}

// Rows padded to multiples of 16, so that rounds whose drafts differ a
// little share a graph (padded sequences take none); never past the pass's
// rows, and never from 32 rows or fewer past 32 (a quantized model's pass
// multiplies 2-32 rows with quant_gemv, more after dequantizing).
TEST(GraphShapes, VerificationRowsPadToTheRowStep) {
  EXPECT_EQ(graph_verify_rows(22, 1536), 32);
  EXPECT_EQ(graph_verify_rows(23, 1536), 32);  // the same graph
  EXPECT_EQ(graph_verify_rows(32, 1536), 32);
  EXPECT_EQ(graph_verify_rows(33, 1536), 48);
  EXPECT_EQ(graph_verify_rows(112, 1536), 112);  // 16 x (1 + γ 6)
  EXPECT_EQ(graph_verify_rows(113, 1536), 128);
  EXPECT_EQ(graph_verify_rows(2, 1536), 16);
  EXPECT_EQ(graph_verify_rows(112, 112), 112);
  EXPECT_EQ(graph_verify_rows(113, 120), 0) << "more rows than a pass may carry";
  for (int64_t rows = 1; rows <= 200; ++rows) {
    const int32_t padded = graph_verify_rows(rows, 4096);
    EXPECT_EQ(padded % kGraphVerifyRowStep, 0);
    EXPECT_GE(padded, rows);
    EXPECT_LT(padded, rows + kGraphVerifyRowStep);
    if (rows <= 32) {
      EXPECT_LE(padded, 32);
    }
  }
}

// Capture slots to a power of two, score strides to a multiple of 1024: a
// context a round longer mostly keeps its graph.
TEST(GraphShapes, CapturesPadToSlotAndStrideBuckets) {
  EXPECT_EQ(graph_bucket(1), 1);
  EXPECT_EQ(graph_bucket(4), 4);
  EXPECT_EQ(graph_bucket(16), 16);
  EXPECT_EQ(graph_bucket(112), 128);  // 16 sequences x (1 + γ 6)
  EXPECT_EQ(graph_capture_stride(4), 1024);
  EXPECT_EQ(graph_capture_stride(8196), 9216);
  EXPECT_EQ(graph_capture_stride(8196 + 7), 9216);
  EXPECT_EQ(graph_capture_stride(9216), 9216);
  for (int32_t stride = 4; stride < 40000; stride += 4) {
    EXPECT_GE(graph_capture_stride(stride), stride);
    EXPECT_LT(graph_capture_stride(stride), stride + kGraphCaptureStrideStep);
    EXPECT_EQ(graph_capture_stride(stride) % 4, 0) << "kv_select reads four scores at once";
  }
}

TEST(GraphShapes, BucketIsTheNextPowerOfTwo) {
  EXPECT_EQ(graph_bucket(0), 1);
  EXPECT_EQ(graph_bucket(1), 1);
  EXPECT_EQ(graph_bucket(1000), 1024);
  EXPECT_EQ(graph_bucket(1024), 1024);
  EXPECT_EQ(graph_bucket(1025), 2048);
  EXPECT_EQ(graph_bucket(8192 + 7), 16384);
}

}  // namespace
}  // namespace vegas
