// A hybrid policy (P+lookup) as the session's one chooser runs it: rounds of
// P's sparse passes and of prompt lookup, each kind explored, the faster
// leading. While lookup's rounds lead they make no selection for the sparse
// passes (SpeculativeDecoder::round's `select`: a probe of the sparse
// drafter drafts from the last selection, which is as lossless as any), and
// the output is still vanilla's.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "speculative/speculative_decoder.h"
#include "support/golden.h"
#include "support/session_run.h"

namespace vegas {
namespace {

TEST(HybridRounds, LookupRoundsSkipTheSelectionWhileTheyLead) {
  const std::shared_ptr<Model> &model = test::shared_cpu_model(test::embedded_model_dir());
  // On the CPU lookup's rounds beat the sparse passes' (four passes a round)
  // by several times on this prompt.
  const std::vector<int32_t> prompt = test::repeated_fibonacci_prompt(*model, 4);
  constexpr int32_t kTokens = 96;
  const std::vector<int32_t> reference =
      test::session_tokens(model, SessionParams{}, prompt, kTokens);

  SessionParams sp;
  sp.speculative = true;
  sp.spec.policy = "vegas+lookup";
  sp.spec.gamma = 4;
  SpeculativeTotals t;
  EXPECT_EQ(test::sampled_session_tokens(model, sp, prompt, kTokens, SamplingParams{}, nullptr, &t),
            reference);
  // Every round but the last (its sequence finished) would select.
  std::printf("%lld rounds, %lld selected\n", static_cast<long long>(t.rounds),
              static_cast<long long>(t.selections));
  EXPECT_GT(t.selections, 0) << "the rounds explored first select";
  EXPECT_LT(t.selections, t.rounds - 1) << "lookup's rounds led and selected nothing";
}

}  // namespace
}  // namespace vegas
