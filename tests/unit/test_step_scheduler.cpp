// StepScheduler, the session's one decider of what a step runs and which KV
// positions it reserves: decoding sequences first (at most max_batch), prompt
// chunks within the prefill budget, the decode kind asked only for a
// non-empty decoding set; reservations that hand back the sequences that do
// not fit (the session ends them with KV_FULL) without touching the others;
// a round's chain room only where the pool has it.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "session/step_scheduler.h"

namespace vegas {
namespace {

constexpr int32_t kPageSize = 4;

class StepSchedulerTest : public ::testing::Test {
 protected:
  // A sequence of `prompt` tokens with `in_cache` of them in the KV cache.
  Sequence &add(int32_t prompt, int32_t in_cache) {
    SequenceRequest req;
    for (int32_t i = 0; i < prompt; ++i) req.prompt.push_back(i + 1);
    req.max_tokens = 100;
    const int32_t id = static_cast<int32_t>(seqs_.size());
    auto seq = std::make_unique<Sequence>(id, std::move(req), nullptr);
    if (in_cache > 0) {
      kv_.reserve(*seq, in_cache);
      kv_.advance(*seq, in_cache);
    }
    Sequence &ref = *seq;
    seqs_[id] = std::move(seq);
    return ref;
  }
  StepPlan plan(const StepScheduler &s, ModeChooser::Kind kind, int *asked = nullptr) {
    return s.plan(seqs_, [&](const std::vector<Sequence *> &) {
      if (asked != nullptr) ++*asked;
      return kind;
    });
  }

  SequenceKv kv_{16, kPageSize, /*prefix_cache=*/false};
  std::map<int32_t, std::unique_ptr<Sequence>> seqs_;
};

TEST_F(StepSchedulerTest, DecodingFirstThenPromptChunksWithinTheBudget) {
  StepScheduler s(kv_, SchedulingParams{/*max_batch=*/2, /*prefill_chunk=*/6, false});
  Sequence &d0 = add(5, 4), &d1 = add(3, 2), &d2 = add(4, 3);  // one pending row each
  Sequence &p0 = add(5, 0), &p1 = add(9, 0);
  add(4, 3).finish = VEGAS_FINISH_LENGTH;  // finished: never planned
  StepPlan vanilla = plan(s, ModeChooser::Kind::kVanilla);
  EXPECT_EQ(vanilla.decoding, (std::vector<Sequence *>{&d0, &d1}));  // max_batch
  // The decoding rows fill the forward pass's batch: no room for prompts.
  EXPECT_EQ(vanilla.forward, (std::vector<Sequence *>{&d0, &d1}));
  EXPECT_EQ(vanilla.rows, (std::vector<int32_t>{1, 1}));
  EXPECT_TRUE(vanilla.decode_only());
  // A round takes the decoding set; prompts share the chunk budget.
  StepPlan round = plan(s, ModeChooser::Kind::kRound);
  EXPECT_EQ(round.kind, ModeChooser::Kind::kRound);
  EXPECT_EQ(round.forward, (std::vector<Sequence *>{&p0, &p1}));
  EXPECT_EQ(round.rows, (std::vector<int32_t>{5, 1}));
  EXPECT_FALSE(round.decode_only());
  (void)d2;
}

TEST_F(StepSchedulerTest, PrefillFirstHoldsDecodingAndTheKindIsAskedOnlyForIt) {
  StepScheduler s(kv_, SchedulingParams{8, 512, /*prefill_first=*/true});
  add(5, 4);
  Sequence &p = add(7, 2);
  int asked = 0;
  StepPlan first = plan(s, ModeChooser::Kind::kRound, &asked);
  EXPECT_TRUE(first.decoding.empty());
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(first.forward, (std::vector<Sequence *>{&p}));
  EXPECT_EQ(first.rows, (std::vector<int32_t>{5}));
  kv_.reserve(p, 7);
  kv_.advance(p, 4);  // the prompt is in: both decode
  StepPlan next = plan(s, ModeChooser::Kind::kRound, &asked);
  EXPECT_EQ(next.decoding.size(), 2u);
  EXPECT_EQ(asked, 1);
}

TEST_F(StepSchedulerTest, ReserveForwardHandsBackWhatDoesNotFit) {
  StepScheduler s(kv_, SchedulingParams{8, 128, false});
  Sequence &small = add(4, 0), &huge = add(61, 0), &other = add(8, 0);
  StepPlan p = plan(s, ModeChooser::Kind::kVanilla);
  ASSERT_EQ(p.forward.size(), 3u);
  // 16 pages of 4: 4 + 8 positions fit, 61 more do not.
  const std::vector<Sequence *> full = s.reserve_forward(p);
  EXPECT_EQ(full, (std::vector<Sequence *>{&huge}));
  EXPECT_EQ(p.forward, (std::vector<Sequence *>{&small, &other}));
  EXPECT_EQ(p.rows, (std::vector<int32_t>{4, 8}));
  EXPECT_EQ(small.page_table.size(), 1u);
  EXPECT_EQ(other.page_table.size(), 2u);
}

TEST_F(StepSchedulerTest, RoundReservesDraftsAndChainRoomWhereThePoolHasIt) {
  StepScheduler s(kv_, SchedulingParams{});
  Sequence &a = add(9, 8), &b = add(9, 8), &c = add(9, 8);  // 2 pages each, 10 left
  std::vector<RoundSeq> round(3);
  round[0] = {&a, 3, 12, 12, false};  // positions 0..11: 3 pages
  round[1] = {&b, 1, 10, 48, false};  // drafts fit, the chain's 48 positions do not
  round[2] = {&c, 6, 80, 80, false};  // not even its drafts fit
  const std::vector<Sequence *> full = s.reserve_round(round);
  EXPECT_EQ(full, (std::vector<Sequence *>{&c}));
  ASSERT_EQ(round.size(), 2u);
  EXPECT_TRUE(round[0].chain_room);
  EXPECT_FALSE(round[1].chain_room);
  EXPECT_GE(int64_t(a.page_table.size()) * kPageSize, 12);
  EXPECT_GE(int64_t(b.page_table.size()) * kPageSize, 10);
  EXPECT_EQ(c.kv_len, 8);  // untouched: the session ends it
  // Settling a round gives the rejected drafts' pages back.
  s.settle(a, 10);
  EXPECT_EQ(a.kv_len, 10);
  EXPECT_EQ(a.page_table.size(), 3u);  // positions 0..10: the next token's slot stays
}

TEST_F(StepSchedulerTest, ChainNeedsRoomForEveryStep) {
  StepScheduler s(kv_, SchedulingParams{});
  Sequence &a = add(5, 4), &b = add(5, 4);
  EXPECT_TRUE(s.reserve_chain({&a, &b}, 4));
  EXPECT_EQ(a.page_table.size(), 2u);
  EXPECT_FALSE(s.reserve_chain({&a, &b}, 60));
  s.advance(a, 1);
  EXPECT_EQ(a.kv_len, 5);
}

}  // namespace
}  // namespace vegas
