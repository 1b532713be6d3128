// The run-time refinement controller (runtime/speculative/refinement_controller.h)
// on synthetic, deterministic streams of rounds: a "world" with a known
// acceptance per draft position (a function of the ratio) and a known cost
// model, rounds drawn from a fixed-seed generator. Checked: it converges to a
// γ whose true rate is within 10% of the best from a γ far too short or too
// long, it respects the warm-up and the hysteresis window (the first switch
// comes exactly at warm-up + window), it does not switch for gains under the
// margin, the switch bound holds on a non-stationary stream, and ratio probes
// adopt a better ratio, give up on worse ones and never run at the min_tokens
// floor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "speculative/refinement_controller.h"

namespace vegas {
namespace {

// A deterministic generator (the same stream on every platform).
class Lcg {
 public:
  explicit Lcg(uint64_t seed) : state_(seed) {}
  double uniform() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state_ >> 11) * 0x1.0p-53;
  }

 private:
  uint64_t state_;
};

struct World {
  // P(draft `position` accepted | the ones before accepted) at `ratio`, round `round`.
  std::function<double(int32_t position, float ratio, int64_t round)> alpha;
  double draft_step = 1e-3;      // seconds, at ratio 0
  double draft_per_ratio = 0.0;  // a draft step costs draft_step * (1 + draft_per_ratio * ratio)
  double verify_fixed = 4e-3;
  double verify_per_row = 0.25e-3;
  int32_t context = 2048;

  double round_seconds(int32_t gamma) const {
    return gamma * draft_step + verify_fixed + verify_per_row * (gamma + 1);
  }
  // The true committed tokens per second of a round of gamma drafts.
  double rate(int32_t gamma, float ratio, int64_t round = 0) const {
    double tokens = 1.0, reach = 1.0;
    for (int32_t j = 0; j < gamma; ++j) {
      reach *= alpha(j, ratio, round);
      tokens += reach;
    }
    return tokens / round_seconds(gamma);
  }
  int32_t best_gamma(int32_t lo, int32_t hi) const {
    int32_t best = lo;
    for (int32_t g = lo; g <= hi; ++g)
      if (rate(g, 0.07f) > rate(best, 0.07f)) best = g;
    return best;
  }
};

World constant_world(double alpha) {
  World w;
  w.alpha = [alpha](int32_t, float, int64_t) { return alpha; };
  return w;
}

struct Trace {
  std::vector<SwitchEvent> switches;
  KnobSetting final_setting;
};

// `amend`, if given, edits each round's observation before the controller
// sees it (other sequences' rows, pooled statistics).
Trace drive(RefinementController &c, const World &w, int64_t rounds, uint64_t seed = 1,
            const std::function<void(RoundObservation &)> &amend = nullptr) {
  Lcg rng(seed);
  Trace t;
  for (int64_t r = 0; r < rounds; ++r) {
    const KnobSetting k = c.current();
    RoundObservation obs;
    obs.drafted = k.gamma;
    while (obs.accepted < k.gamma && rng.uniform() < w.alpha(obs.accepted, k.ratio, r))
      obs.accepted += 1;
    obs.context = w.context;
    obs.draft_step_seconds = w.draft_step * (1.0 + w.draft_per_ratio * k.ratio);
    obs.verify_seconds = w.verify_fixed + w.verify_per_row * (k.gamma + 1);
    obs.verify_rows = k.gamma + 1;
    if (amend) amend(obs);
    if (auto s = c.observe(obs)) t.switches.push_back(*s);
  }
  t.final_setting = c.adopted();
  return t;
}

RefinementConfig gamma_only() {
  RefinementConfig cfg;
  cfg.tune_ratio = false;
  return cfg;
}

// From a γ far too short (1 where 8 is best) and far too long (16 where 1 is
// best), over several seeds: the first switch comes right after warm-up +
// window and the final γ's true rate is within 10% of the best γ's.
void expect_converges(double alpha, int32_t start) {
  const World w = constant_world(alpha);
  const int32_t best = w.best_gamma(1, 16);
  ASSERT_NE(best, start);
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    RefinementController c(gamma_only(), {start, 0.07f});
    const Trace t = drive(c, w, 300, seed);
    ASSERT_FALSE(t.switches.empty()) << "seed " << seed;
    EXPECT_EQ(t.switches[0].round, kWarmupRounds + kWindowRounds) << "seed " << seed;
    EXPECT_EQ(t.switches[0].from.gamma, start);
    EXPECT_NE(t.switches[0].to.gamma, start);
    EXPECT_LE(c.switches(), kMaxSwitches);
    const double final_rate = w.rate(t.final_setting.gamma, 0.07f);
    std::printf(
        "[refine] alpha %.2f start %d seed %d: best %d (%.0f tok/s), final %d (%.0f tok/s), "
        "%zu switches\n",
        alpha, start, static_cast<int>(seed), best, w.rate(best, 0.07f), t.final_setting.gamma,
        final_rate, t.switches.size());
    EXPECT_GE(final_rate, 0.9 * w.rate(best, 0.07f)) << "seed " << seed;
  }
}

TEST(RefinementController, ConvergesFromAGammaFarTooShort) {
  expect_converges(0.95, 1);
}

TEST(RefinementController, ConvergesFromAGammaFarTooLong) {
  expect_converges(0.6, 16);
}

// A profile's τ (RefinementConfig::expected_tau) that the rounds confirm
// keeps its setting even where the per-sequence model would switch (γ 1 at
// acceptance 0.95, where 8 is best); one the rounds contradict (recorded 3.5,
// observed ~1.95) lets refinement run as without a profile, from the same
// round (warm-up + window).
TEST(RefinementController, TrustsAProfileWhoseTauHoldsAndRefinesOneThatDoesNot) {
  const World w = constant_world(0.95);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    RefinementConfig trusted = gamma_only();
    trusted.expected_tau = 1.95;  // the true τ of γ 1: 1 + 0.95
    RefinementController kept(trusted, {1, 0.07f});
    const Trace t = drive(kept, w, 300, seed);
    EXPECT_TRUE(t.switches.empty())
        << "seed " << seed << ": switched to " << t.switches[0].to.gamma;
    EXPECT_EQ(kept.adopted().gamma, 1);

    RefinementConfig wrong = gamma_only();
    wrong.expected_tau = 3.5;
    RefinementController refined(wrong, {1, 0.07f});
    const Trace u = drive(refined, w, 300, seed);
    ASSERT_FALSE(u.switches.empty()) << "seed " << seed;
    EXPECT_EQ(u.switches[0].round, kWarmupRounds + kWindowRounds) << "seed " << seed;
    EXPECT_GE(w.rate(u.final_setting.gamma, 0.07f), 0.9 * w.rate(w.best_gamma(1, 16), 0.07f));
  }
}

// Decoding in a batch (other sequences' verify rows), the profile's τ is
// judged on the pool the observations carry: a sequence whose own τ is far off
// (α 0.3: τ 1.3 against 1.95) keeps the setting while the pool confirms it,
// and refines once the pool contradicts it.
TEST(RefinementController, InABatchThePooledTauDecides) {
  const World w = constant_world(0.3);
  for (double pool_mean : {1.95, 3.5}) {
    RefinementConfig cfg = gamma_only();
    cfg.expected_tau = 1.95;
    RefinementController c(cfg, {4, 0.07f});
    int64_t n = 0;
    double sum = 0.0, squares = 0.0;
    const Trace t = drive(c, w, 200, 3, [&](RoundObservation &obs) {
      const int32_t gamma = obs.drafted;
      obs.verify_seconds = w.verify_fixed + w.verify_per_row * 16 * (gamma + 1);
      obs.verify_rows = 16 * (gamma + 1);  // fifteen other sequences
      for (int i = 0; i < 15; ++i) {       // their rounds: τ pool_mean - 0.5 or + 0.5
        const double committed = pool_mean + (i % 2 ? 0.5 : -0.5);
        n += 1, sum += committed, squares += committed * committed;
      }
      obs.pool_rounds = n;
      obs.pool_sum = sum;
      obs.pool_squares = squares;
    });
    const size_t switches = t.switches.size();
    if (pool_mean == 1.95)
      EXPECT_EQ(switches, 0u) << "the pool confirms the profile";
    else
      EXPECT_GT(switches, 0u) << "the pool contradicts the profile";
  }
}

TEST(RefinementController, RespectsWarmupAndWindow) {
  const World w = constant_world(0.9);
  for (int32_t window : {1, 4, 10}) {
    for (int32_t warmup : {0, 8, 20}) {
      RefinementConfig cfg = gamma_only();
      cfg.window_rounds = window;
      cfg.warmup_rounds = warmup;
      RefinementController c(cfg, {1, 0.07f});
      const Trace t = drive(c, w, warmup + window + 5);
      ASSERT_FALSE(t.switches.empty()) << "warmup " << warmup << " window " << window;
      // Decisions start after the warm-up; the win must hold `window` rounds.
      EXPECT_EQ(t.switches[0].round, warmup + window)
          << "warmup " << warmup << " window " << window;
    }
  }
}

TEST(RefinementController, NoSwitchForGainsUnderTheMargin) {
  // Acceptance 1 at every position and verification nearly free per row:
  // every γ >= 12 is within a few percent of γ 16; starting at 14, no other γ
  // beats it by the 5% margin, so it must never switch.
  World w = constant_world(1.0);
  w.verify_per_row = 0.0;
  w.verify_fixed = 5e-3;
  ASSERT_LT(w.rate(16, 0.07f) / w.rate(14, 0.07f), 1.0 + kSwitchMargin);
  RefinementController c(gamma_only(), {14, 0.07f});
  const Trace t = drive(c, w, 200);
  EXPECT_TRUE(t.switches.empty()) << "switched to " << t.switches[0].to.gamma;
  EXPECT_EQ(c.adopted().gamma, 14);
}

TEST(RefinementController, SwitchBoundHoldsOnANonStationaryStream) {
  // The acceptance flips between 0.95 and 0.3 every 30 rounds: the best γ
  // keeps moving, so an unbounded controller would switch again and again.
  World w;
  w.alpha = [](int32_t, float, int64_t round) { return (round / 30) % 2 == 0 ? 0.95 : 0.3; };
  RefinementConfig unbounded = gamma_only();
  unbounded.max_switches = 1000;
  RefinementController free_running(unbounded, {6, 0.07f});
  const Trace many = drive(free_running, w, 600);
  EXPECT_GT(many.switches.size(), static_cast<size_t>(kMaxSwitches));
  RefinementController bounded(gamma_only(), {6, 0.07f});
  const Trace few = drive(bounded, w, 600);
  EXPECT_EQ(few.switches.size(), static_cast<size_t>(kMaxSwitches));
  EXPECT_EQ(bounded.switches(), kMaxSwitches);
  // Every switch is a real change, each from the setting the previous one made.
  for (size_t i = 0; i < few.switches.size(); ++i) {
    EXPECT_NE(few.switches[i].from.gamma, few.switches[i].to.gamma);
    if (i > 0) {
      EXPECT_EQ(few.switches[i].from.gamma, few.switches[i - 1].to.gamma);
      EXPECT_GT(few.switches[i].round, few.switches[i - 1].round + kWindowRounds);
    }
  }
}

TEST(RefinementController, FixedKnobsNeverMove) {
  RefinementConfig cfg;
  cfg.tune_gamma = false;
  cfg.tune_ratio = false;
  RefinementController c(cfg, {1, 0.02f});
  World w = constant_world(0.95);
  w.context = 100000;
  const Trace t = drive(c, w, 200);
  EXPECT_TRUE(t.switches.empty());
  EXPECT_EQ(c.probes(), 0);
  EXPECT_EQ(c.adopted().gamma, 1);
  EXPECT_FLOAT_EQ(c.adopted().ratio, 0.02f);
}

TEST(RefinementController, RatioProbeAdoptsABetterRatioAndGivesUpOnWorse) {
  // At a long context the ratio sets the budget; drafts from at least 7% of
  // the KV are accepted at 0.95, from less at 0.5.
  World w;
  w.context = 20000;
  w.alpha = [](int32_t, float ratio, int64_t) { return ratio >= 0.07f ? 0.95 : 0.5; };
  w.draft_per_ratio = 1.0;
  RefinementConfig cfg;
  cfg.tune_gamma = false;
  RefinementController c(cfg, {6, 0.05f});
  const Trace t = drive(c, w, 400);
  ASSERT_FALSE(t.switches.empty());
  // The first probe goes down (cheaper drafts), fails, and the next goes up.
  EXPECT_GT(t.switches[0].to.ratio, 0.05f);
  EXPECT_GE(c.adopted().ratio, 0.07f);
  EXPECT_EQ(c.adopted().gamma, 6);
  EXPECT_LE(c.probes(), kMaxProbes);
  std::printf("[refine] ratio: 0.05 -> %.4f after %d probes, %d switches\n", c.adopted().ratio,
              c.probes(), c.switches());
  // Once at a good ratio, probing both ways finds nothing better: it stops.
  const int32_t probes = c.probes();
  drive(c, w, 400, 2);
  EXPECT_LE(c.probes(), kMaxProbes);
  EXPECT_LE(c.probes() - probes, 2);
}

TEST(RefinementController, NoRatioProbeWhereTheBudgetIsTheFloor) {
  // 1000 candidates at min_tokens 256: ratios 0.047 and 0.105 both select
  // 256, so a probe would measure nothing.
  World w = constant_world(0.8);
  w.context = 1000;
  RefinementConfig cfg;
  cfg.tune_gamma = false;
  RefinementController c(cfg, {6, 0.07f});
  drive(c, w, 300);
  EXPECT_EQ(c.probes(), 0);
  EXPECT_EQ(c.switches(), 0);
}

TEST(RefinementController, EstimatesFollowTheStream) {
  World w;
  w.alpha = [](int32_t position, float, int64_t) { return position < 3 ? 0.9 : 0.5; };
  RefinementConfig cfg = gamma_only();
  cfg.tune_gamma = false;
  RefinementController c(cfg, {8, 0.07f});
  drive(c, w, 400);
  EXPECT_NEAR(c.acceptance().alpha(0), 0.9, 0.1);
  EXPECT_NEAR(c.acceptance().alpha(5), 0.5, 0.2);
  EXPECT_NEAR(c.cost().draft_step_seconds(), w.draft_step, 1e-9);
  // One row count only: the slope comes from the prior (fixed part = 8 rows).
  const double t9 = w.verify_fixed + w.verify_per_row * 9;
  EXPECT_NEAR(c.cost().verify_seconds(9), t9, 1e-9);
  EXPECT_NEAR(c.cost().per_row_seconds(), t9 / (9 + kVerifyFixedRowsPrior), 1e-9);
  EXPECT_GT(c.tau_ema(), 1.0);
}

}  // namespace
}  // namespace vegas
