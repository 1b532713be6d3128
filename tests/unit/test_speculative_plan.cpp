// SpeculativeDecoder::plan, the round's contract with the scheduler: each
// sequence's drafts (none before its first selection, never past max_tokens)
// and the KV positions to reserve for them (the newest token and every draft
// it would make), the chain's larger reservation only where a round can run
// as one chain on the device (device selection, no penalties, drafts); and
// plan() itself reserves nothing.
#include <gtest/gtest.h>

#include <vector>

#include "model/model_config.h"
#include "speculative/speculative_decoder.h"
#include "tiny_checkpoint.h"

namespace vegas {
namespace {

constexpr int32_t kPageSize = 16;

Sequence decoding_sequence(int32_t id, int32_t n_prompt, int32_t n_generated, int32_t max_tokens) {
  SequenceRequest req;
  for (int32_t i = 0; i < n_prompt; ++i) req.prompt.push_back(3 + i % 50);
  req.max_tokens = max_tokens;
  Sequence seq(id, std::move(req), nullptr);
  for (int32_t i = 0; i < n_generated; ++i) seq.tokens.push_back(7);
  seq.kv_len = static_cast<int32_t>(seq.tokens.size()) - 1;  // the newest token pending
  return seq;
}

class SpeculativePlan : public ::testing::Test {
 protected:
  SpeculativePlan()
      : config_(parse_model_config(test::tiny_config_json("Qwen3ForCausalLM").dump(), "tiny")) {
    params_.policy = "streaming";  // selects without captured scores
    params_.gamma = 6;
  }
  ModelConfig config_;
  SpeculativeParams params_;
};

TEST_F(SpeculativePlan, DraftsAfterTheFirstSelectionWithinMaxTokens) {
  SpeculativeDecoder decoder(config_, params_, 1024);
  Sequence a = decoding_sequence(0, 40, 1, 100);  // 99 tokens to go: gamma 6
  Sequence b = decoding_sequence(1, 40, 1, 3);    // 2 to go: one draft, then the bonus token
  std::vector<RoundSeq> before = decoder.plan({&a, &b}, kPageSize);
  ASSERT_EQ(before.size(), 2u);
  EXPECT_EQ(before[0].gamma, 0);  // nothing selected yet: verify only
  EXPECT_EQ(before[0].reserve, a.kv_len + 6 + 1);
  decoder.select_after_prefill(a);
  decoder.select_after_prefill(b);
  const std::vector<RoundSeq> plan = decoder.plan({&a, &b}, kPageSize);
  EXPECT_EQ(plan[0].seq, &a);
  EXPECT_EQ(plan[0].gamma, 6);
  EXPECT_EQ(plan[0].reserve, a.kv_len + 7);
  EXPECT_EQ(plan[1].gamma, 1);
  EXPECT_EQ(plan[1].reserve, b.kv_len + 2);
  for (const RoundSeq &r : plan) {
    EXPECT_EQ(r.chain_reserve, r.reserve) << "host selection never chains";
    EXPECT_FALSE(r.chain_room);
  }
  // Nothing was reserved or advanced.
  EXPECT_TRUE(a.page_table.empty());
  EXPECT_EQ(a.kv_len, 40);
}

TEST_F(SpeculativePlan, ChainReservesTheLongestGammaForEveryDraftingSequence) {
  SpeculativeDecoder decoder(config_, params_, 1024);
  if (!decoder.use_device_selection(true)) GTEST_SKIP() << "streaming has no device form";
  Sequence a = decoding_sequence(0, 40, 1, 100);
  Sequence b = decoding_sequence(1, 40, 1, 3);
  Sequence c = decoding_sequence(2, 40, 1, 3);
  c.req.sampling.repetition_penalty = 1.2f;  // penalties: drafted pass by pass
  for (Sequence *s : {&a, &b, &c}) decoder.select_after_prefill(*s);
  const std::vector<RoundSeq> plan = decoder.plan({&a, &b, &c}, kPageSize);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].chain_reserve, a.kv_len + 7);
  EXPECT_EQ(plan[1].gamma, 1);
  EXPECT_EQ(plan[1].chain_reserve, b.kv_len + 7);  // drafts the chain's 6, keeps 1
  EXPECT_EQ(plan[2].gamma, 1);
  EXPECT_EQ(plan[2].chain_reserve, c.kv_len + 2);  // its own drafts only
}

}  // namespace
}  // namespace vegas
