// The "user" policy: a C vtable (vegas_select_policy) called through plain
// C-linkage functions; what it is given, that its answer is used, that bad
// answers are refused, and the reset/destroy/struct_size ownership rules.
#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <vector>

#include "common/error.h"
#include "select/score_reduce.h"
#include "select/select_policy.h"
#include "select_reference.h"
#include "vegas.h"

namespace {

// What the C callbacks saw and what they should answer.
struct Recorder {
  vegas_select_input last_input;
  std::vector<float> scores_seen;
  int32_t capacity_seen = 0;
  std::vector<int32_t> answer;   // written verbatim
  int32_t return_value = -1000;  // -1000: return answer.size()
  int32_t resets = 0, last_reset = -1, destroys = 0, selects = 0;
};

}  // namespace

extern "C" {

static int32_t recorder_select(const vegas_select_input *input, int32_t *out, int32_t capacity,
                               void *user_data) {
  Recorder *r = static_cast<Recorder *>(user_data);
  r->selects++;
  r->last_input = *input;
  r->capacity_seen = capacity;
  r->scores_seen.assign(input->scores, input->scores + input->n_candidates);
  for (size_t i = 0; i < r->answer.size(); ++i) out[i] = r->answer[i];
  return r->return_value == -1000 ? static_cast<int32_t>(r->answer.size()) : r->return_value;
}

static void recorder_reset(int32_t seq_id, void *user_data) {
  Recorder *r = static_cast<Recorder *>(user_data);
  r->resets++;
  r->last_reset = seq_id;
}

static void recorder_destroy(void *user_data) {
  static_cast<Recorder *>(user_data)->destroys++;
}

}  // extern "C"

namespace vegas {
namespace {

constexpr int32_t kN = 600, kHeads = 4;

struct Fixture {
  std::vector<float> logits, lse;
  Fixture() {
    std::mt19937 rng(31);
    logits = select_ref::uniform_scores(rng, 3 * kHeads * kN, -5.0f, 5.0f);
    lse = select_ref::uniform_scores(rng, 3 * kHeads, 6.0f, 8.0f);
  }
  SelectInput input() const {
    SelectInput in;
    in.seq_id = 12;
    in.layer = 3;
    in.n_layers = 8;
    in.n = kN;
    in.scores.logits = logits.data();
    in.scores.lse = lse.data();
    in.scores.n_rows = 3;
    in.scores.stride = kN;
    return in;
  }
};

SelectionShape shape() {
  SelectionShape s;
  s.max_candidates = kN;
  s.max_rows = 3;
  s.n_heads = kHeads;
  s.n_kv_heads = 2;
  s.head_dim = 8;
  return s;
}

vegas_select_policy vtable(Recorder *r) {
  vegas_select_policy v{};
  v.struct_size = sizeof(vegas_select_policy);
  v.user_data = r;
  v.select = recorder_select;
  v.reset = recorder_reset;
  v.destroy = recorder_destroy;
  return v;
}

// Proves the callback gets the sequence, layer, candidates, the budget formula
// and, as scores, the reduction of the first and last rows in the configured
// kind; its positions are returned as the selection; reset is forwarded and
// destroy runs exactly once when the policy goes.
TEST(SelectUser, CallbackSeesInputsAndAnswers) {
  const Fixture fx;
  for (ScoreKind kind : {ScoreKind::kWeight, ScoreKind::kLogit}) {
    Recorder rec;
    rec.answer = {0, 5, 17, 599};
    vegas_select_policy v = vtable(&rec);
    SelectionOptions options;
    options.ratio = 0.07f;
    options.min_tokens = 16;
    options.score_kind = kind;
    options.user = &v;
    auto policy = make_selection_policy("user", options, shape());
    v.select = nullptr;  // the policy holds its own copy
    EXPECT_EQ(policy->needs().score_rows, ScoreRows::kFirstLast);
    std::vector<int32_t> out(kN, -1);
    ASSERT_EQ(policy->select(fx.input(), out.data(), kN), 4);
    EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 4), rec.answer);

    const vegas_select_input &in = rec.last_input;
    EXPECT_EQ(in.struct_size, sizeof(vegas_select_input));
    EXPECT_EQ(in.seq_id, 12);
    EXPECT_EQ(in.layer, 3);
    EXPECT_EQ(in.n_layers, 8);
    EXPECT_EQ(in.n_candidates, kN);
    EXPECT_EQ(in.budget, 42);  // ceil(0.07 * 600)
    EXPECT_EQ(in.score_kind, static_cast<int32_t>(kind));
    EXPECT_EQ(in.scores_on_device, 0);
    EXPECT_EQ(in.stream, nullptr);
    EXPECT_EQ(rec.capacity_seen, kN);
    std::vector<float> want(kN);
    const int32_t rows[2] = {0, 2};
    reduce_scores(fx.input().scores, kHeads, rows, 2, kN, kind, want.data());
    EXPECT_EQ(rec.scores_seen, want);

    policy->reset(12);
    EXPECT_EQ(rec.resets, 1);
    EXPECT_EQ(rec.last_reset, 12);
    EXPECT_EQ(rec.destroys, 0);
    policy.reset();
    EXPECT_EQ(rec.destroys, 1);
  }
}

vegas_status status_of_answer(std::vector<int32_t> answer, int32_t return_value = -1000) {
  const Fixture fx;
  Recorder rec;
  rec.answer = std::move(answer);
  rec.return_value = return_value;
  vegas_select_policy v = vtable(&rec);
  SelectionOptions options;
  options.user = &v;
  auto policy = make_selection_policy("user", options, shape());
  std::vector<int32_t> out(kN);
  try {
    policy->select(fx.input(), out.data(), kN);
  } catch (const Error &e) {
    return e.status();
  }
  return VEGAS_OK;
}

// Proves answers out of [0, n), not strictly ascending, repeated or too many
// are refused; an empty answer is fine; a negative vegas_status is passed
// through and any other negative value is refused.
TEST(SelectUser, BadAnswersAreRefused) {
  EXPECT_EQ(status_of_answer({}), VEGAS_OK);
  EXPECT_EQ(status_of_answer({1, 2, 3}), VEGAS_OK);
  EXPECT_EQ(status_of_answer({-1, 2}), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of_answer({2, kN}), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of_answer({5, 3}), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of_answer({3, 3}), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of_answer({1}, kN + 1), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of_answer({}, VEGAS_ERR_CANCELLED), VEGAS_ERR_CANCELLED);
  EXPECT_EQ(status_of_answer({}, VEGAS_ERR_OUT_OF_MEMORY), VEGAS_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(status_of_answer({}, -12345), VEGAS_ERR_INVALID_ARGUMENT);
}

// Proves a struct_size that does not reach `select` is STRUCT_SIZE and a NULL
// select is INVALID_ARGUMENT, neither taking ownership (no destroy); and that
// an older, smaller struct covering only `select` never has reset/destroy read.
TEST(SelectUser, StructSizeAndOwnership) {
  Recorder rec;
  vegas_select_policy v = vtable(&rec);
  SelectionOptions options;
  options.user = &v;
  v.struct_size = offsetof(vegas_select_policy, select);
  try {
    make_selection_policy("user", options, shape());
    FAIL();
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_STRUCT_SIZE);
  }
  v.struct_size = sizeof(vegas_select_policy);
  v.select = nullptr;
  try {
    make_selection_policy("user", options, shape());
    FAIL();
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_INVALID_ARGUMENT);
  }
  EXPECT_EQ(rec.destroys, 0);

  v = vtable(&rec);
  v.struct_size = offsetof(vegas_select_policy, select) + sizeof(v.select);
  auto policy = make_selection_policy("user", options, shape());
  policy->reset(1);
  policy.reset();
  EXPECT_EQ(rec.resets, 0);
  EXPECT_EQ(rec.destroys, 0);
}

}  // namespace
}  // namespace vegas
