// SpeculativeDecoder::plan, the round's contract with the scheduler: each
// sequence's drafts (none before its first selection, never past max_tokens)
// and the KV positions to reserve for them (the newest token and every draft
// it would make), the chain's larger reservation only where a round can run
// as one chain on the device (device selection, no penalties, drafts); a
// lookup round of few sequences drafting past γ, its rows within the rows
// the session allows it (none by default), where it captures no scores for
// every row; and plan() itself reserves nothing.
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

TEST_F(SpeculativePlan, ALookupRoundOfFewSequencesDraftsPastGamma) {
  params_.policy = "lookup";
  params_.gamma = 4;
  SpeculativeDecoder decoder(config_, params_, 1 << 20);
  Sequence lone = decoding_sequence(99, 40, 1, 100);
  decoder.select_after_prefill(lone);
  EXPECT_EQ(decoder.plan({&lone}, kPageSize)[0].lookup_gamma, 0) << "no rows allowed yet";
  decoder.set_wide_lookup_rows(128);  // the GPU's
  std::vector<Sequence> seqs;
  for (int32_t i = 0; i < 40; ++i) seqs.push_back(decoding_sequence(i, 40, 1, 100));
  seqs[1].req.max_tokens = 7;  // 6 to go: 5 drafts and the bonus token
  std::vector<Sequence *> all;
  for (Sequence &s : seqs) {
    decoder.select_after_prefill(s);
    all.push_back(&s);
  }
  auto plan_of = [&](size_t n) {
    return decoder.plan(std::vector<Sequence *>(all.begin(), all.begin() + n), kPageSize);
  };
  const std::vector<RoundSeq> one = plan_of(1);
  EXPECT_EQ(one[0].gamma, 4);
  EXPECT_EQ(one[0].reserve, seqs[0].kv_len + 5);
  EXPECT_EQ(one[0].lookup_gamma, 10) << "at most 10";
  EXPECT_EQ(one[0].lookup_reserve, seqs[0].kv_len + 11);
  EXPECT_FALSE(one[0].lookup_room) << "the scheduler reserves";
  const std::vector<RoundSeq> two = plan_of(2);
  EXPECT_EQ(two[1].lookup_gamma, 5) << "never past max_tokens";
  const std::vector<RoundSeq> sixteen = plan_of(16);
  for (size_t i = 2; i < sixteen.size(); ++i)
    EXPECT_EQ(sixteen[i].lookup_gamma, 7) << "16 x 8 rows";
  for (const RoundSeq &r : plan_of(40)) EXPECT_EQ(r.lookup_gamma, 0) << "3 rows: below gamma";
  decoder.set_wide_lookup_rows(48);
  EXPECT_EQ(plan_of(4)[0].lookup_gamma, 10);
  EXPECT_EQ(plan_of(8)[0].lookup_gamma, 5);
  EXPECT_EQ(plan_of(12)[0].lookup_gamma, 0);
}

TEST_F(SpeculativePlan, OnlyAHybridsLookupRoundsDraftPastGamma) {
  params_.policy = "streaming+lookup";  // selects without scores: any verify rows
  SpeculativeDecoder decoder(config_, params_, 1 << 20);
  decoder.set_wide_lookup_rows(128);
  Sequence a = decoding_sequence(0, 40, 1, 100);
  decoder.select_after_prefill(a);
  EXPECT_EQ(decoder.plan({&a}, kPageSize, false, true)[0].lookup_gamma, 0) << "sparse round";
  EXPECT_EQ(decoder.plan({&a}, kPageSize, true, true)[0].lookup_gamma, 10);
  EXPECT_EQ(decoder.plan({&a}, kPageSize, true, false)[0].lookup_gamma, 10);
}

}  // namespace
}  // namespace vegas
