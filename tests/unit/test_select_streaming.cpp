// streaming and full: exact position sets.
#include <gtest/gtest.h>

#include <vector>

#include "select/select_policy.h"

namespace vegas {
namespace {

std::vector<int32_t> run(const char *name, const SelectionOptions &options, int32_t n) {
  SelectionShape shape;
  shape.max_candidates = 5000;
  shape.n_heads = 2;
  shape.n_kv_heads = 1;
  shape.head_dim = 4;
  auto policy = make_selection_policy(name, options, shape);
  std::vector<int32_t> out(static_cast<size_t>(n) + 1, -1);
  SelectInput in;  // no scores: these policies must not read any
  in.n = n;
  out.resize(static_cast<size_t>(policy->select(in, out.data(), n)));
  return out;
}

std::vector<int32_t> range(int32_t begin, int32_t end) {
  std::vector<int32_t> r;
  for (int32_t i = begin; i < end; ++i) r.push_back(i);
  return r;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Proves streaming keeps [0, sink) and the most recent k - sink positions:
// k = 350 of n = 5000 at ratio 0.07.
TEST(SelectStreaming, SinkPlusRecentWindow) {
  SelectionOptions options;
  options.ratio = 0.07f;
  options.min_tokens = 256;
  options.sink = 16;
  EXPECT_EQ(run("streaming", options, 5000), concat(range(0, 16), range(5000 - 334, 5000)));
  // Below the floor: n = 200 < 256 keeps everything, once each.
  EXPECT_EQ(run("streaming", options, 200), range(0, 200));
}

// Proves a budget below the sink count keeps only sink positions, and sink 0 is
// a pure recent window.
TEST(SelectStreaming, SmallBudgetAndNoSink) {
  SelectionOptions options;
  options.ratio = 0.0f;
  options.min_tokens = 10;
  options.sink = 16;
  EXPECT_EQ(run("streaming", options, 100), range(0, 10));
  options.sink = 0;
  EXPECT_EQ(run("streaming", options, 100), range(90, 100));
  EXPECT_TRUE(run("streaming", options, 0).empty());
}

// Proves full returns every candidate whatever the budget options say.
TEST(SelectFull, EveryPosition) {
  SelectionOptions options;
  options.ratio = 0.0f;
  options.min_tokens = 0;
  EXPECT_EQ(run("full", options, 777), range(0, 777));
  EXPECT_TRUE(run("full", options, 0).empty());
}

}  // namespace
}  // namespace vegas
