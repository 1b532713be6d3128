// The session is the one writer of a sequence's RNG (issue P0-6): a
// speculative round draws on a copy of Sequence::rng and reports the counter
// it reached (RoundOutcome::rng_counter); the session sets it, whether or not
// the sequence stops inside the round's tokens. Proves, on the embedded model
// (CPU, sampled VEGAS mode, drafts sparse enough to be rejected):
// - after every step each sequence's counter moved by exactly the draws the
//   step made for it: 1 for the prefill's token; for a round of d drafts of
//   which a were kept (it commits a + 1 tokens), d draft draws, then one
//   acceptance test per draft up to the first rejection (min(a + 1, d)),
//   then the correction or bonus token. Rounds that rejected a draft and
//   rounds that kept every draft both occur, for a rule read from candidates
//   (top-k) and one from whole rows (top-p); a greedy sequence batched with
//   them draws nothing;
// - a sequence stopped by a stop id inside a round ends with the counter the
//   same round reaches when run to its end (a run of the same seed without
//   the stop id), so the whole round's draws were applied, not only those of
//   the tokens it committed; and its tokens are that run's up to the stop.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "session/session.h"
#include "support/model_dir.h"
#include "support/session_run.h"

namespace vegas {
namespace {

// A sequence as a step left it.
struct Snapshot {
  uint64_t counter = 0;
  int64_t rounds = 0, drafted = 0, accepted = 0;
  int32_t n_generated = 0;
  bool finished = false;
};

Snapshot snapshot(const Sequence &seq) {
  return {seq.rng.counter(),  seq.stats.rounds,  seq.stats.drafted,
          seq.stats.accepted, seq.n_generated(), seq.finished()};
}

SamplingParams sampled(int32_t top_k, float top_p, uint64_t seed) {
  SamplingParams s;
  s.temperature = 0.9f;
  s.top_k = top_k;
  s.top_p = top_p;
  s.seed = seed;
  return s;
}

// What the draws of the steps told: rounds that rejected a draft, rounds
// that kept every one.
struct DrawCounts {
  int32_t rejecting = 0, keeping = 0;
};

class SessionRoundRng : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::shared_cpu_model(test::embedded_model_dir());
    prompt_ = test::fibonacci_prompt(*model_);
  }

  // VEGAS mode with a selection small enough (12 of ~60 positions) that the
  // drafts' distributions differ from the target's.
  static SessionParams vegas_params(int32_t gamma) {
    SessionParams p;
    p.speculative = true;
    p.spec.gamma = gamma;
    p.spec.selection.min_tokens = 12;
    return p;
  }

  int32_t submit(Session &session, const SamplingParams &rule, int32_t max_tokens,
                 const std::vector<int32_t> &stop_ids = {}) const {
    SequenceRequest req;
    req.prompt.assign(prompt_.begin(), prompt_.end());
    req.sampling = rule;
    req.max_tokens = max_tokens;
    req.ignore_eos = true;
    req.stop_ids.assign(stop_ids.begin(), stop_ids.end());
    return session.submit(std::move(req));
  }

  // Checks one sequence's step (before -> after) against the draws it made.
  static void expect_step_draws(const Sequence &seq, const Snapshot &before, const Snapshot &after,
                                DrawCounts *counts) {
    if (before.finished) return;
    const bool greedy = seq.req.sampling.greedy();
    const int64_t rounds = after.rounds - before.rounds;
    ASSERT_LE(rounds, 1);
    if (rounds == 0) {  // the prefill's (or a plain step's) one token
      const int64_t tokens = after.n_generated - before.n_generated;
      EXPECT_EQ(after.counter - before.counter, greedy ? 0u : static_cast<uint64_t>(tokens));
      return;
    }
    const int64_t d = after.drafted - before.drafted, a = after.accepted - before.accepted;
    ASSERT_LE(a, d);
    // A round commits its kept drafts and the correction or bonus token
    // (no stop ids here; plan() keeps it within max_tokens).
    EXPECT_EQ(after.n_generated - before.n_generated, a + 1);
    const int64_t draws = greedy ? 0 : d + std::min(a + 1, d) + 1;
    EXPECT_EQ(after.counter - before.counter, static_cast<uint64_t>(draws))
        << "sequence " << seq.id << ": " << d << " drafts, " << a << " kept";
    (a < d ? counts->rejecting : counts->keeping) += d > 0 ? 1 : 0;
  }

  std::shared_ptr<Model> model_;
  std::vector<int32_t> prompt_;
};

TEST_F(SessionRoundRng, EachRoundAdvancesTheCounterByItsDraws) {
  Session session(model_, vegas_params(4));
  const std::vector<int32_t> ids = {submit(session, sampled(20, 1.0f, 11), 40),
                                    submit(session, sampled(0, 0.9f, 12), 40),
                                    submit(session, SamplingParams{}, 40)};
  std::vector<DrawCounts> counts(ids.size());
  for (int32_t active = 1; active > 0;) {
    std::vector<Snapshot> before;
    for (int32_t id : ids) before.push_back(snapshot(session.sequence(id)));
    active = session.step();
    for (size_t i = 0; i < ids.size(); ++i)
      expect_step_draws(session.sequence(ids[i]), before[i], snapshot(session.sequence(ids[i])),
                        &counts[i]);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    const Sequence &seq = session.sequence(ids[i]);
    EXPECT_EQ(seq.finish, VEGAS_FINISH_LENGTH);
    EXPECT_EQ(seq.n_generated(), 40);
    EXPECT_GT(seq.stats.rounds, 0);
  }
  EXPECT_EQ(session.sequence(ids[2]).rng.counter(), 0u) << "a greedy sequence draws nothing";
  for (size_t i = 0; i < 2; ++i) {  // else the formula went half tested
    EXPECT_GT(counts[i].rejecting, 0) << "sequence " << ids[i] << " never rejected a draft";
    EXPECT_GT(counts[i].keeping, 0) << "sequence " << ids[i] << " never kept every draft";
  }
}

TEST_F(SessionRoundRng, StopInsideARoundAppliesTheWholeRoundsDraws) {
  const SamplingParams rule = sampled(20, 1.0f, 11);
  // The free run, step by step.
  std::vector<Snapshot> steps;
  std::vector<int32_t> free_tokens;
  {
    Session session(model_, vegas_params(6));
    const int32_t id = submit(session, rule, 40);
    for (int32_t active = 1; active > 0;) {
      active = session.step();
      steps.push_back(snapshot(session.sequence(id)));
    }
    const Sequence &seq = session.sequence(id);
    free_tokens.assign(seq.tokens.begin() + seq.n_prompt(), seq.tokens.end());
  }
  // A round that committed several tokens, the first of them new: stopping
  // on it ends the sequence at that round's first token.
  size_t round = 0;
  for (size_t s = 1; s < steps.size() && round == 0; ++s) {
    const int32_t first = steps[s - 1].n_generated;
    const int32_t t = free_tokens[static_cast<size_t>(first)];
    const bool is_new = std::find(free_tokens.begin(), free_tokens.begin() + first, t) ==
                        free_tokens.begin() + first;
    if (steps[s].rounds == steps[s - 1].rounds + 1 && steps[s].n_generated - first >= 2 && is_new)
      round = s;
  }
  ASSERT_GT(round, 0u) << "no round committed several tokens";
  const int32_t stop_at = steps[round - 1].n_generated;
  const int32_t stop = free_tokens[static_cast<size_t>(stop_at)];

  Session session(model_, vegas_params(6));
  const int32_t id = submit(session, rule, 40, {stop});
  session.run();
  const Sequence &seq = session.sequence(id);
  EXPECT_EQ(seq.finish, VEGAS_FINISH_STOP);
  const std::vector<int32_t> tokens(seq.tokens.begin() + seq.n_prompt(), seq.tokens.end());
  EXPECT_EQ(tokens, std::vector<int32_t>(free_tokens.begin(), free_tokens.begin() + stop_at));
  EXPECT_EQ(seq.stats.rounds, steps[round].rounds);
  EXPECT_EQ(seq.rng.counter(), steps[round].counter)
      << "the stopped round's counter is not the whole round's";
  // More than the token it committed needs (a kept draft: its draw and its test).
  EXPECT_GT(seq.rng.counter(), steps[round - 1].counter + 2);
}

}  // namespace
}  // namespace vegas
