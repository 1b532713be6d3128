// map_draft_scores (P@model, SpecAttn): the model's layer l and head h read
// the draft's layer l * Ld / L and head h * Hd / H, logits and lse alike,
// row by row; shapes that cannot stand for each other are refused.
#include <gtest/gtest.h>

#include <vector>

#include "common/error.h"
#include "speculative/draft_scores.h"

namespace vegas {
namespace {

// Every draft score encodes where it came from: layer * 1000 + row * 100 +
// head * 10 (+ the candidate / 100 for logits).
float code(int32_t layer, int32_t row, int32_t head) {
  return static_cast<float>(layer * 1000 + row * 100 + head * 10);
}

TEST(DraftScores, EachLayerAndHeadReadsTheSameRelativePlace) {
  const ScoreShape from{2, 2, 4, 3}, to{8, 2, 8, 3};
  std::vector<float> logits(2 * 2 * 4 * 3), lse(2 * 2 * 4);
  for (int32_t l = 0; l < 2; ++l)
    for (int32_t r = 0; r < 2; ++r)
      for (int32_t h = 0; h < 4; ++h) {
        const size_t line = (static_cast<size_t>(l) * 2 + r) * 4 + h;
        lse[line] = code(l, r, h);
        for (int32_t c = 0; c < 3; ++c) logits[line * 3 + c] = code(l, r, h) + c / 100.0f;
      }
  std::vector<float> out_logits(8 * 2 * 8 * 3, -1.0f), out_lse(8 * 2 * 8, -1.0f);
  map_draft_scores(logits.data(), lse.data(), from, out_logits.data(), out_lse.data(), to);
  for (int32_t l = 0; l < 8; ++l)
    for (int32_t r = 0; r < 2; ++r)
      for (int32_t h = 0; h < 8; ++h) {
        const size_t line = (static_cast<size_t>(l) * 2 + r) * 8 + h;
        const float want = code(l / 4, r, h / 2);  // 2 of 8 layers, 4 of 8 heads
        EXPECT_EQ(out_lse[line], want) << "layer " << l << " row " << r << " head " << h;
        for (int32_t c = 0; c < 3; ++c) EXPECT_EQ(out_logits[line * 3 + c], want + c / 100.0f);
      }
}

TEST(DraftScores, MoreDraftLayersThanTheModelsTakeEveryFewth) {
  const ScoreShape from{6, 1, 1, 1}, to{3, 1, 1, 1};
  const std::vector<float> logits = {0, 1, 2, 3, 4, 5}, lse = {10, 11, 12, 13, 14, 15};
  std::vector<float> out_logits(3), out_lse(3);
  map_draft_scores(logits.data(), lse.data(), from, out_logits.data(), out_lse.data(), to);
  EXPECT_EQ(out_logits, (std::vector<float>{0, 2, 4}));
  EXPECT_EQ(out_lse, (std::vector<float>{10, 12, 14}));
}

TEST(DraftScores, RefusesShapesThatCannotStandForEachOther) {
  std::vector<float> buf(64, 0.0f);
  EXPECT_THROW(
      map_draft_scores(buf.data(), buf.data(), {1, 1, 1, 4}, buf.data(), buf.data(), {1, 1, 1, 5}),
      Error);  // other candidates
  EXPECT_THROW(
      map_draft_scores(buf.data(), buf.data(), {1, 2, 1, 4}, buf.data(), buf.data(), {1, 1, 1, 4}),
      Error);  // other rows
  EXPECT_THROW(
      map_draft_scores(buf.data(), buf.data(), {0, 1, 1, 4}, buf.data(), buf.data(), {1, 1, 1, 4}),
      Error);  // no draft layer
}

}  // namespace
}  // namespace vegas
