// Selection budget, options and factory: the k formula at its edges, the
// window split, option validation and the factory's errors and needs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "select/select_options.h"
#include "select/select_policy.h"

namespace vegas {
namespace {

SelectionShape small_shape() {
  SelectionShape shape;
  shape.max_candidates = 1000;
  shape.max_rows = 7;
  shape.n_heads = 4;
  shape.n_kv_heads = 2;
  shape.head_dim = 8;
  return shape;
}

template <typename F>
vegas_status status_of(F &&f, std::string *message = nullptr) {
  try {
    f();
  } catch (const Error &e) {
    if (message) *message = e.what();
    return e.status();
  }
  return VEGAS_OK;
}

// Proves k = clamp(ceil(ratio * n), min_tokens, n) on typical values, including
// a product that is not an integer (573.44 -> 574).
TEST(SelectBudget, RatioCeilAndFloor) {
  EXPECT_EQ(selection_budget(8192, 0.07f, 256), 574);
  EXPECT_EQ(selection_budget(16384, 0.07f, 256), 1147);  // 1146.88
  EXPECT_EQ(selection_budget(2048, 0.07f, 256), 256);    // 143.36 -> floor 256
  EXPECT_EQ(selection_budget(10, 0.25f, 0), 3);          // 2.5 -> 3
}

// Proves n < min_tokens keeps every position, and min_tokens > n never
// exceeds n (no clamp with lo > hi).
TEST(SelectBudget, FewerCandidatesThanFloorKeepsAll) {
  EXPECT_EQ(selection_budget(100, 0.07f, 256), 100);
  EXPECT_EQ(selection_budget(256, 0.07f, 256), 256);
  EXPECT_EQ(selection_budget(1, 0.0f, 256), 1);
  EXPECT_EQ(selection_budget(0, 0.5f, 256), 0);
}

// Proves ratio 0 gives exactly the floor and ratio 1 gives n.
TEST(SelectBudget, RatioZeroAndOne) {
  EXPECT_EQ(selection_budget(5000, 0.0f, 256), 256);
  EXPECT_EQ(selection_budget(5000, 0.0f, 0), 0);
  EXPECT_EQ(selection_budget(5000, 1.0f, 256), 5000);
  EXPECT_EQ(selection_budget(5000, 1.0f, 0), 5000);
}

// Proves a float ratio whose decimal product is an integer does not round up
// by the float's representation error (0.07f is slightly above 0.07), while a
// genuinely fractional product still rounds up.
TEST(SelectBudget, FloatRatioSnapsToIntegerProduct) {
  EXPECT_GT(static_cast<double>(0.07f) * 10000, 700.0);  // the trap this avoids
  EXPECT_EQ(selection_budget(10000, 0.07f, 0), 700);
  EXPECT_EQ(selection_budget(1000, 0.07f, 0), 70);
  EXPECT_EQ(selection_budget(10001, 0.07f, 0), 701);  // 700.07
  EXPECT_EQ(selection_budget(3, 0.1f, 0), 1);         // 0.3
}

// Proves the recent window is round(share * k), halves away from zero, in [0, k].
TEST(SelectBudget, WindowCount) {
  EXPECT_EQ(window_count(574, 0.0f), 0);
  EXPECT_EQ(window_count(574, 1.0f), 574);
  EXPECT_EQ(window_count(574, 0.5f), 287);
  EXPECT_EQ(window_count(5, 0.5f), 3);  // 2.5 -> 3
  EXPECT_EQ(window_count(256, 0.75f), 192);
  EXPECT_EQ(window_count(0, 0.5f), 0);
}

// Proves every option out of range (NaN included) is rejected naming its field.
TEST(SelectOptions, ValidationNamesTheField) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char *field;
    void (*mutate)(SelectionOptions &, float);
    float value;
  };
  const std::vector<Case> cases = {
      {"ratio", [](SelectionOptions &o, float v) { o.ratio = v; }, -0.1f},
      {"ratio", [](SelectionOptions &o, float v) { o.ratio = v; }, 1.5f},
      {"ratio", [](SelectionOptions &o, float v) { o.ratio = v; }, nan},
      {"window_share", [](SelectionOptions &o, float v) { o.window_share = v; }, 1.01f},
      {"window_share", [](SelectionOptions &o, float v) { o.window_share = v; }, nan},
      {"p", [](SelectionOptions &o, float v) { o.p = v; }, 0.0f},
      {"p", [](SelectionOptions &o, float v) { o.p = v; }, nan},
      {"min_tokens", [](SelectionOptions &o, float) { o.min_tokens = -1; }, 0},
      {"sink", [](SelectionOptions &o, float) { o.sink = -3; }, 0},
      {"quest_page_size", [](SelectionOptions &o, float) { o.quest_page_size = 0; }, 0},
      {"score_kind", [](SelectionOptions &o, float) { o.score_kind = static_cast<ScoreKind>(7); },
       0},
  };
  for (const Case &c : cases) {
    SelectionOptions options;
    c.mutate(options, c.value);
    std::string message;
    EXPECT_EQ(status_of([&] { validate_selection_options(options); }, &message),
              VEGAS_ERR_INVALID_ARGUMENT)
        << c.field;
    EXPECT_NE(message.find(c.field), std::string::npos) << message;
  }
  EXPECT_EQ(status_of([] { validate_selection_options(SelectionOptions{}); }), VEGAS_OK);
}

// Proves the factory rejects an unknown name with UNSUPPORTED naming it, topp
// with logit scores, "user" without a vtable, and a bad shape.
TEST(SelectFactory, Errors) {
  std::string message;
  EXPECT_EQ(status_of([&] { make_selection_policy("h2o", {}, small_shape()); }, &message),
            VEGAS_ERR_UNSUPPORTED);
  EXPECT_NE(message.find("h2o"), std::string::npos) << message;

  SelectionOptions logit;
  logit.score_kind = ScoreKind::kLogit;
  EXPECT_EQ(status_of([&] { make_selection_policy("topp", logit, small_shape()); }),
            VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([&] { make_selection_policy("vegas", logit, small_shape()); }), VEGAS_OK);
  EXPECT_EQ(status_of([&] { make_selection_policy("user", {}, small_shape()); }),
            VEGAS_ERR_INVALID_ARGUMENT);

  SelectionShape bad = small_shape();
  bad.n_kv_heads = 3;  // does not divide 4 query heads
  EXPECT_EQ(status_of([&] { make_selection_policy("vegas", {}, bad); }, &message),
            VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("n_kv_heads"), std::string::npos) << message;
}

// Proves each built-in policy reports what the backend must collect for it.
TEST(SelectFactory, Needs) {
  const SelectionShape shape = small_shape();
  const auto needs = [&](const char *name) {
    return make_selection_policy(name, {}, shape)->needs();
  };
  EXPECT_EQ(needs("vegas").score_rows, ScoreRows::kFirstLast);
  EXPECT_EQ(needs("topp").score_rows, ScoreRows::kFirstLast);
  EXPECT_EQ(needs("vegas-all").score_rows, ScoreRows::kAll);
  EXPECT_EQ(needs("specextend").score_rows, ScoreRows::kAll);
  EXPECT_EQ(needs("streaming").score_rows, ScoreRows::kNone);
  EXPECT_EQ(needs("full").score_rows, ScoreRows::kNone);
  EXPECT_TRUE(needs("quest").page_bounds);
  EXPECT_TRUE(needs("quest").every_draft_step);
  EXPECT_FALSE(needs("vegas").every_draft_step);
  for (const char *name :
       {"vegas", "vegas-all", "specextend", "streaming", "quest", "topp", "full"})
    EXPECT_EQ(make_selection_policy(name, {}, shape)->name(), name);
}

// Proves a call with n beyond the shape, a layer out of range, or a buffer
// shorter than n is refused with a clear status before anything is written.
TEST(SelectFactory, CallChecks) {
  auto policy = make_selection_policy("full", {}, small_shape());
  std::vector<int32_t> out(2000, -7);
  SelectInput in;
  in.n = 1001;
  EXPECT_EQ(status_of([&] { policy->select(in, out.data(), 2000); }), VEGAS_ERR_INVALID_ARGUMENT);
  in.n = 10;
  EXPECT_EQ(status_of([&] { policy->select(in, out.data(), 9); }), VEGAS_ERR_BUFFER_TOO_SMALL);
  in.layer = 1;
  in.n_layers = 1;
  EXPECT_EQ(status_of([&] { policy->select(in, out.data(), 10); }), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(out[0], -7);
}

}  // namespace
}  // namespace vegas
