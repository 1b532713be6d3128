// A lookup round of one sequence drafts past the session's γ (up to 10, its
// verify rows within the session's wide_lookup_rows: SpeculativeDecoder::plan;
// the GPU's 128 here, set on the CPU backend, whose own default is none): on
// code that repeats itself the drafts reach positions γ and beyond and are
// accepted there, and the tokens are still vanilla's. By default the CPU's
// lookup rounds draft γ.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "speculative/speculative_decoder.h"
#include "support/golden.h"
#include "support/session_run.h"

namespace vegas {
namespace {

TEST(WideLookup, OneSequencesLookupRoundsDraftPastGammaLosslessly) {
  const std::shared_ptr<Model> &model = test::shared_cpu_model(test::embedded_model_dir());
  const std::vector<int32_t> prompt = test::repeated_fibonacci_prompt(*model, 4);
  constexpr int32_t kTokens = 64;
  const std::vector<int32_t> reference =
      test::session_tokens(model, SessionParams{}, prompt, kTokens);

  SessionParams sp;
  sp.speculative = true;
  sp.spec.policy = "lookup";
  sp.spec.gamma = 4;
  SpeculativeTotals plain;
  EXPECT_EQ(
      test::sampled_session_tokens(model, sp, prompt, kTokens, SamplingParams{}, nullptr, &plain),
      reference);
  EXPECT_EQ(plain.drafted_at[4], 0) << "the CPU backend's lookup rounds draft gamma";
  sp.wide_lookup_rows = 128;
  SpeculativeTotals t;
  EXPECT_EQ(test::sampled_session_tokens(model, sp, prompt, kTokens, SamplingParams{}, nullptr, &t),
            reference);
  ASSERT_EQ(t.drafted_at.size(), 10u) << "positions counted up to the wide γ";
  std::printf("drafted at 0 / 4 / 9: %lld / %lld / %lld, accepted at 4: %lld\n",
              static_cast<long long>(t.drafted_at[0]), static_cast<long long>(t.drafted_at[4]),
              static_cast<long long>(t.drafted_at[9]), static_cast<long long>(t.accepted_at[4]));
  EXPECT_GT(t.drafted_at[4], 0) << "drafts past gamma 4";
  EXPECT_GT(t.accepted_at[4], 0) << "and accepted there";
}

}  // namespace
}  // namespace vegas
