// A hybrid policy (P+lookup) as the session's one chooser runs it: rounds of
// P's sparse passes and of prompt lookup, each kind explored, the faster
// leading. While lookup's rounds lead they make no selection for the sparse
// passes (SpeculativeDecoder::round's `select`: a probe of the sparse
// drafter drafts from the last selection, which is as lossless as any), and
// the output is still vanilla's. The tests choose what each kind of round
// costs (SessionParams::step_seconds).
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <vector>

#include "speculative/speculative_decoder.h"
#include "support/golden.h"
#include "support/session_run.h"

namespace vegas {
namespace {

// The seconds the chooser sees: each kind of round a fixed cost, so that
// which kind leads does not hang on a loaded machine's wall time.
std::function<double(ModeChooser::Kind, double)> fixed_costs(double round_ms, double alternate_ms) {
  return [=](ModeChooser::Kind kind, double /*wall_seconds*/) {
    return (kind == ModeChooser::Kind::kAlternate ? alternate_ms : round_ms) * 1e-3;
  };
}

// Runs the hybrid over the repeated prompt; returns its rounds' totals after
// checking that its tokens are vanilla's.
SpeculativeTotals hybrid_run(double round_ms, double alternate_ms) {
  const std::shared_ptr<Model> &model = test::shared_cpu_model(test::embedded_model_dir());
  const std::vector<int32_t> prompt = test::repeated_fibonacci_prompt(*model, 4);
  constexpr int32_t kTokens = 96;
  const std::vector<int32_t> reference =
      test::session_tokens(model, SessionParams{}, prompt, kTokens);

  SessionParams sp;
  sp.speculative = true;
  sp.spec.policy = "vegas+lookup";
  sp.spec.gamma = 4;
  sp.step_seconds = fixed_costs(round_ms, alternate_ms);
  SpeculativeTotals t;
  EXPECT_EQ(test::sampled_session_tokens(model, sp, prompt, kTokens, SamplingParams{}, nullptr, &t),
            reference);
  std::printf("%lld rounds, %lld selected\n", static_cast<long long>(t.rounds),
              static_cast<long long>(t.selections));
  return t;
}

// The chooser explores each kind of round (one uncounted round, then
// kMinSamples); lookup's rounds, ten times cheaper, lead after that and select
// nothing, and the sparse probes that follow draft from the last selection.
TEST(HybridRounds, LookupRoundsSkipTheSelectionWhileTheyLead) {
  const SpeculativeTotals t = hybrid_run(/*round_ms=*/10.0, /*alternate_ms=*/1.0);
  EXPECT_GT(t.selections, 0) << "the rounds explored first select";
  EXPECT_LE(t.selections, 2 * (ModeChooser::kMinSamples + 1))
      << "lookup's rounds led and still selected";
  EXPECT_GT(t.rounds, 2 * (ModeChooser::kMinSamples + 1) + 4) << "too short a run to tell";
}

// The same rounds with the sparse passes leading: every lookup round is a
// probe, and like every round but the last (its sequence finished) it
// selects for the sparse passes that lead.
TEST(HybridRounds, EveryRoundSelectsWhileTheSparsePassesLead) {
  const SpeculativeTotals t = hybrid_run(/*round_ms=*/1.0, /*alternate_ms=*/10.0);
  EXPECT_EQ(t.selections, t.rounds - 1);
}

}  // namespace
}  // namespace vegas
