// ModeChooser (VEGAS_MODE_AUTO) on chosen costs: it explores both kinds of
// decode step, then runs the faster one and probes the slower only as often
// as its waste stays within kProbeBudget of the time; it follows a change of
// costs within one probe interval; a new batch bucket starts from the
// nearest measured one and one try of its slower kind instead of exploring;
// a bucket the tuning profile marks "vanilla" runs vanilla steps without
// exploring rounds and tries them only every kPriorProbeSteps steps. With a
// hybrid policy's alternate rounds as a third kind (or instead of vanilla
// steps, outside auto mode) the same holds for all of them.
#include "session/mode_chooser.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace vegas {
namespace {

using Kind = ModeChooser::Kind;

struct Costs {
  double round_tokens_per_s;          // a round commits 4 tokens per sequence
  double vanilla_tokens_per_s;        // a vanilla step commits 1 per sequence
  double alternate_tokens_per_s = 0;  // an alternate round commits 3 per sequence
};

struct Mix {
  int64_t rounds = 0, vanilla = 0, alternate = 0, tokens = 0;
  double seconds = 0;
};

// `steps` decode steps of n sequences at these costs.
Mix drive(ModeChooser &c, int32_t n, const Costs &costs, int steps) {
  Mix r;
  for (int i = 0; i < steps; ++i) {
    const Kind kind = c.next(n);
    const int64_t tokens = kind == Kind::kRound ? 4 * n : kind == Kind::kAlternate ? 3 * n : n;
    const double rate = kind == Kind::kRound       ? costs.round_tokens_per_s
                        : kind == Kind::kAlternate ? costs.alternate_tokens_per_s
                                                   : costs.vanilla_tokens_per_s;
    const double seconds = static_cast<double>(tokens) / rate;
    c.observe(kind, n, tokens, seconds);
    (kind == Kind::kRound ? r.rounds : kind == Kind::kAlternate ? r.alternate : r.vanilla) += 1;
    r.tokens += tokens;
    r.seconds += seconds;
  }
  return r;
}

TEST(ModeChooser, ExploresRoundsThenVanillaStepsFirst) {
  ModeChooser c;
  // Each kind's first step is a warm-up (one-time costs), not counted.
  ASSERT_EQ(c.next(16), Kind::kRound);
  c.observe(Kind::kRound, 16, 64, 1.0);
  for (int i = 0; i < ModeChooser::kMinSamples; ++i) {
    ASSERT_EQ(c.next(16), Kind::kRound) << "step " << i;
    c.observe(Kind::kRound, 16, 64, 0.01);
  }
  EXPECT_EQ(c.probe_interval(16), 0) << "still exploring";
  ASSERT_EQ(c.next(16), Kind::kVanilla);
  c.observe(Kind::kVanilla, 16, 16, 1.0);
  for (int i = 0; i < ModeChooser::kMinSamples; ++i) {
    ASSERT_EQ(c.next(16), Kind::kVanilla) << "step " << i;
    c.observe(Kind::kVanilla, 16, 16, 0.001);
  }
  EXPECT_DOUBLE_EQ(c.rate(Kind::kRound, 16), 6400.0);
  EXPECT_DOUBLE_EQ(c.rate(Kind::kVanilla, 16), 16000.0);
  EXPECT_EQ(c.next(16), Kind::kVanilla);  // the faster, once both are measured
}

// A new batch's first step (a quarter or more of its sequences in their first
// decode step) pays their one-time costs and is not counted: a slow first
// lookup round does not hand the bucket to vanilla steps. One sequence
// arriving in a step of 16 leaves it counted.
TEST(ModeChooser, ANewBatchsFirstStepIsNotCounted) {
  ModeChooser c(true, true);
  auto explore = [&](Kind kind, int64_t tokens, double seconds) {
    for (int i = 0; i <= ModeChooser::kMinSamples; ++i) {
      ASSERT_EQ(c.next(16), kind) << "step " << i;
      c.observe(kind, 16, tokens, seconds);
    }
  };
  explore(Kind::kRound, 64, 0.004);      // 16,000 tokens/s
  explore(Kind::kAlternate, 64, 0.001);  // 64,000
  explore(Kind::kVanilla, 16, 0.0005);   // 32,000
  ASSERT_EQ(c.next(16), Kind::kAlternate);
  const double rate = c.rate(Kind::kAlternate, 16);
  // A new batch of 16: its first round waited for the prompts' indexes.
  c.observe(Kind::kAlternate, 16, 16, 0.01, 16);
  EXPECT_DOUBLE_EQ(c.rate(Kind::kAlternate, 16), rate);
  c.observe(Kind::kAlternate, 16, 16, 0.01, 4);  // a quarter: still not counted
  EXPECT_DOUBLE_EQ(c.rate(Kind::kAlternate, 16), rate);
  EXPECT_EQ(c.next(16), Kind::kAlternate);
  c.observe(Kind::kAlternate, 16, 64, 0.002, 1);  // one newcomer: counted
  EXPECT_LT(c.rate(Kind::kAlternate, 16), rate);
}

// Over 20,000 steps the mix's throughput is within the probe budget (plus the
// exploration) of the faster kind's, whichever it is and by how much.
TEST(ModeChooser, TheSlowerKindCostsAtMostTheProbeBudget) {
  const Costs cases[] = {{2000, 1000}, {500, 1000}, {1100, 1000}, {1000, 1050}, {300, 3000}};
  for (const Costs &costs : cases) {
    SCOPED_TRACE(::testing::Message() << "rounds " << costs.round_tokens_per_s << " vanilla "
                                      << costs.vanilla_tokens_per_s << " tokens/s");
    ModeChooser c;
    const Mix r = drive(c, 16, costs, 20000);
    const double best = std::max(costs.round_tokens_per_s, costs.vanilla_tokens_per_s);
    const double got = static_cast<double>(r.tokens) / r.seconds;
    EXPECT_GE(got, best * (1.0 - ModeChooser::kProbeBudget) * 0.995);
    EXPECT_GT(std::min(r.rounds, r.vanilla), ModeChooser::kMinSamples) << "the slower is probed";
  }
}

TEST(ModeChooser, FollowsAChangeOfCosts) {
  ModeChooser c;
  drive(c, 32, {500, 1000}, 3000);  // vanilla wins: rounds are probed rarely
  const int32_t interval = c.probe_interval(32);
  ASSERT_GT(interval, 50);
  ASSERT_EQ(c.next(32), Kind::kVanilla);
  // A longer context: rounds now pay double. The next probe sees it.
  int steps_to_switch = -1;
  for (int i = 0; i < 5000 && steps_to_switch < 0; ++i) {
    drive(c, 32, {2000, 1000}, 1);
    ModeChooser peek = c;
    int32_t rounds_in_a_row = 0;
    for (int j = 0; j < 3; ++j) rounds_in_a_row += peek.next(32) == Kind::kRound;
    if (rounds_in_a_row == 3) steps_to_switch = i + 1;
  }
  ASSERT_GT(steps_to_switch, 0) << "never switched to rounds";
  EXPECT_LE(steps_to_switch, interval + 2);
}

TEST(ModeChooser, ANewBatchBucketStartsFromTheNearestMeasuredOne) {
  ModeChooser c;
  drive(c, 16, {500, 1000}, 500);
  EXPECT_EQ(c.next(31), Kind::kVanilla);  // 16..31: the same bucket
  EXPECT_EQ(c.rate(Kind::kRound, 8), 0.0);
  EXPECT_EQ(c.next(8), Kind::kVanilla) << "rounds lost by half at 16: no try at 8";
  // A close race at 16 sequences: a new bucket tries the slower kind once.
  drive(c, 16, {900, 1000}, 500);
  EXPECT_EQ(c.rate(Kind::kRound, 64), 0.0);
  EXPECT_EQ(c.next(64), Kind::kRound) << "the 16 bucket's rates, and one try of its slower kind";
  EXPECT_DOUBLE_EQ(c.rate(Kind::kVanilla, 64), c.rate(Kind::kVanilla, 16));
  c.observe(Kind::kRound, 64, 256, 256 / 500.0);  // as slow as at 16 sequences
  EXPECT_EQ(c.next(64), Kind::kVanilla) << "no exploration beyond that try";
  const int32_t interval = c.probe_interval(64);
  EXPECT_GT(interval, 1);
  // Its own costs take over at the next probe: here rounds win at 64 sequences.
  const Mix r = drive(c, 64, {3000, 1000}, 400);
  EXPECT_GE(r.rounds, 400 - interval - 2);
}

// A bucket used in turn with another keeps its own rates; one that a draining
// batch comes back to after more than kStaleSteps steps away (the last
// batch's tail) restarts from the larger bucket in use, and its own costs
// then take over again; a larger bucket (a new batch) keeps its own.
TEST(ModeChooser, ABucketBackAfterAWhileRestartsFromTheOneInUse) {
  ModeChooser c;
  drive(c, 16, {500, 1000}, 500);   // vanilla wins at 16..31
  drive(c, 64, {3000, 1000}, 500);  // rounds win at 64..127
  for (int i = 0; i < 100; ++i) {   // in turn: each keeps its own
    drive(c, 16, {500, 1000}, 1);
    drive(c, 64, {3000, 1000}, 1);
  }
  const Mix mixed = drive(c, 16, {500, 1000}, 1);
  EXPECT_EQ(mixed.vanilla, 1) << "the 16 bucket keeps its own rates";
  drive(c, 64, {3000, 1000}, ModeChooser::kStaleSteps + 1);
  EXPECT_EQ(c.next(16), Kind::kRound) << "back after a while: the 64 bucket's choice";
  EXPECT_DOUBLE_EQ(c.rate(Kind::kRound, 16), c.rate(Kind::kRound, 64));
  c.observe(Kind::kRound, 16, 64, 64 / 500.0);
  const Mix r = drive(c, 16, {500, 1000}, 400);
  EXPECT_GE(r.vanilla, 390) << "its own costs take over";
  // A new batch of 64 after a while at 16 keeps the 64 bucket's own rates.
  EXPECT_EQ(c.next(64), Kind::kRound) << "its own choice, not the 16 bucket's";
}

TEST(ModeChooser, IgnoresStepsWithoutTime) {
  ModeChooser c;
  c.observe(Kind::kRound, 4, 16, 1.0);  // the warm-up
  for (int i = 0; i < 10; ++i) c.observe(Kind::kRound, 4, 16, 0.0);
  c.observe(Kind::kRound, 4, 16, -1.0);
  EXPECT_EQ(c.rate(Kind::kRound, 4), 0.0);
  EXPECT_EQ(c.next(4), Kind::kRound);  // still exploring
}

// The profile says vanilla: no round at all in the first kPriorProbeSteps - 1
// steps (exploring would have run three, the first paying one-time costs).
// Then one probe round every kPriorProbeSteps steps: the first is the
// uncounted warm-up, and after two counted ones that show rounds twice as
// fast, the chooser follows its own measurements and runs rounds.
TEST(ModeChooser, AVanillaPriorSkipsExplorationAndProbesRarely) {
  ModeChooser c;
  const ModeChooser::Prior vanilla{true};
  for (int i = 0; i < ModeChooser::kPriorProbeSteps - 1; ++i) {
    ASSERT_EQ(c.next(64, vanilla), Kind::kVanilla) << "step " << i;
    c.observe(Kind::kVanilla, 64, 64, 0.001);
  }
  EXPECT_EQ(c.rate(Kind::kRound, 64), 0.0);
  int rounds = 0;
  for (int i = 0; i < 3 * ModeChooser::kPriorProbeSteps; ++i) {
    const Kind kind = c.next(64, vanilla);
    if (kind == Kind::kRound) ++rounds;
    // Rounds at twice vanilla's rate: 4 tokens a sequence in two steps' time.
    c.observe(kind, 64, kind == Kind::kRound ? 256 : 64, 0.002);
    if (rounds == 3) break;
  }
  EXPECT_EQ(rounds, 3) << "one probe every kPriorProbeSteps steps";
  EXPECT_DOUBLE_EQ(c.rate(Kind::kRound, 64), 128000.0);
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(c.next(64, vanilla), Kind::kRound) << "measured faster: rounds from now on";
    c.observe(Kind::kRound, 64, 256, 0.002);
  }
}

// A prior only counts for a bucket seen for the first time: one measured
// without it keeps its measurements.
TEST(ModeChooser, APriorDoesNotOverrideMeasurements) {
  ModeChooser c;
  drive(c, 16, Costs{40000.0, 10000.0}, 50);  // rounds four times faster
  EXPECT_EQ(c.next(16, ModeChooser::Prior{true}), Kind::kRound);
}

// Auto mode with a hybrid policy: rounds, then alternate rounds, then
// vanilla steps are explored (each after an uncounted warm-up), then the
// fastest of the three runs.
TEST(ModeChooser, ExploresRoundsAlternateRoundsThenVanillaSteps) {
  ModeChooser c(true, true);
  EXPECT_TRUE(c.chooses(Kind::kAlternate));
  const std::pair<Kind, double> order[] = {
      {Kind::kRound, 0.01}, {Kind::kAlternate, 0.002}, {Kind::kVanilla, 0.001}};
  for (const auto &[kind, seconds] : order)
    for (int i = 0; i <= ModeChooser::kMinSamples; ++i) {
      ASSERT_EQ(c.next(16), kind) << "step " << i;
      c.observe(kind, 16, 32, i == 0 ? 1.0 : seconds);
    }
  EXPECT_DOUBLE_EQ(c.rate(Kind::kRound, 16), 3200.0);
  EXPECT_DOUBLE_EQ(c.rate(Kind::kAlternate, 16), 16000.0);
  EXPECT_DOUBLE_EQ(c.rate(Kind::kVanilla, 16), 32000.0);
  EXPECT_EQ(c.next(16), Kind::kVanilla);
}

// With three kinds the mix stays within the probe budget of the fastest,
// whichever it is, and each slower kind is still probed. (Auto mode with
// vegas+lookup at 8K x 16 on the H200 ran vanilla steps nearly throughout
// when the decoder chose the drafter by itself: the session saw a round's
// rate as the mix of both drafters' rounds.)
TEST(ModeChooser, ThreeKindsCostAtMostTheProbeBudget) {
  const Costs cases[] = {{900, 1000, 1600},
                         {1600, 1000, 900},
                         {500, 1000, 700},
                         {1000, 1050, 1100},
                         {300, 3000, 2900}};
  for (const Costs &costs : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "rounds " << costs.round_tokens_per_s << " vanilla "
                 << costs.vanilla_tokens_per_s << " alternate " << costs.alternate_tokens_per_s);
    ModeChooser c(true, true);
    const Mix r = drive(c, 16, costs, 20000);
    const double best = std::max(
        {costs.round_tokens_per_s, costs.vanilla_tokens_per_s, costs.alternate_tokens_per_s});
    const double got = static_cast<double>(r.tokens) / r.seconds;
    EXPECT_GE(got, best * (1.0 - 2 * ModeChooser::kProbeBudget) * 0.995);
    EXPECT_GT(std::min({r.rounds, r.vanilla, r.alternate}), ModeChooser::kMinSamples)
        << "every slower kind is probed";
  }
}

// A hybrid policy outside auto mode: rounds of either drafter, never a
// vanilla step, and a profile's vanilla prior does not apply.
TEST(ModeChooser, AHybridWithoutAutoModeRunsNoVanillaSteps) {
  ModeChooser c(false, true);
  EXPECT_FALSE(c.chooses(Kind::kVanilla));
  EXPECT_EQ(c.next(16, ModeChooser::Prior{true}), Kind::kRound);
  const Mix r = drive(c, 16, {1000, 5000, 2000}, 2000);
  EXPECT_EQ(r.vanilla, 0);
  EXPECT_GT(r.alternate, 1900) << "the faster drafter";
  EXPECT_GT(r.rounds, ModeChooser::kMinSamples);
}

// A vanilla prior speaks for both kinds of round (`vegas tune` measures the
// hybrids and lookup too): neither is explored, the prior's probes take each
// in turn, and once both are measured the fastest kind runs (here the
// alternate rounds, twice vanilla's rate; the policy's own rounds half).
TEST(ModeChooser, AVanillaPriorCoversAlternateRoundsToo) {
  ModeChooser c(true, true);
  const ModeChooser::Prior vanilla{true};
  for (int i = 0; i < ModeChooser::kPriorProbeSteps - 1; ++i) {
    ASSERT_EQ(c.next(16, vanilla), Kind::kVanilla) << "step " << i;
    c.observe(Kind::kVanilla, 16, 16, 16 / 1000.0);
  }
  std::vector<Kind> probes;
  const Costs costs{500, 1000, 2000};
  int32_t alternate = 0;
  for (int i = 0; i < 8 * ModeChooser::kPriorProbeSteps && alternate < 3; ++i) {
    const Kind kind = c.next(16, vanilla);
    if (kind != Kind::kVanilla) probes.push_back(kind);
    alternate += kind == Kind::kAlternate;
    const int64_t tokens = kind == Kind::kRound ? 64 : kind == Kind::kAlternate ? 48 : 16;
    const double rate = kind == Kind::kRound       ? costs.round_tokens_per_s
                        : kind == Kind::kAlternate ? costs.alternate_tokens_per_s
                                                   : costs.vanilla_tokens_per_s;
    c.observe(kind, 16, tokens, static_cast<double>(tokens) / rate);
  }
  // The prior's probes take each kind in turn (each kind's first is its
  // uncounted warm-up); a kind measured is probed as usual from then on.
  ASSERT_GE(probes.size(), 4u);
  EXPECT_EQ(std::vector<Kind>(probes.begin(), probes.begin() + 4),
            (std::vector<Kind>{Kind::kRound, Kind::kAlternate, Kind::kRound, Kind::kAlternate}));
  EXPECT_EQ(alternate, 3) << "one probe every kPriorProbeSteps steps";
  const Mix r = drive(c, 16, costs, ModeChooser::kPriorProbeSteps);
  EXPECT_GT(r.alternate, 9 * ModeChooser::kPriorProbeSteps / 10) << "measured fastest";
  EXPECT_DOUBLE_EQ(c.rate(Kind::kAlternate, 16), 2000.0);
  EXPECT_GT(c.rate(Kind::kRound, 16), 0.0);
}

}  // namespace
}  // namespace vegas
