// A speculative round hands the session several tokens at once
// (RoundOutcome); a sequence that stops inside them keeps exactly what plain
// decoding keeps and drops the rest of the round. Proves, on the embedded
// model (CPU, greedy): with a stop id or a stop string met mid-generation,
// VEGAS mode ends with the same tokens, text and finish reason as vanilla;
// its rounds did commit several tokens at once (else the test proves
// nothing); and every KV page is back in the pool afterwards (a finished
// sequence is not settled, its release takes everything).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "session/session.h"
#include "support/model_dir.h"
#include "support/session_run.h"

namespace vegas {
namespace {

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  vegas_finish_reason finish = VEGAS_FINISH_NONE;
  SequenceStats stats;
  int32_t free_pages_after = -1, pool_pages = 0;
};

SessionParams params_for(bool speculative) {
  SessionParams p;
  p.speculative = speculative;
  p.prefix_cache = false;  // every page must come back free
  p.spec.gamma = 6;
  return p;
}

Outcome run(const std::shared_ptr<Model> &model, bool speculative,
            const std::vector<int32_t> &prompt, const std::vector<int32_t> &stop_ids,
            const std::vector<std::string> &stop_strings) {
  Session session(model, params_for(speculative));
  SequenceRequest req;
  req.prompt.assign(prompt.begin(), prompt.end());
  req.max_tokens = 96;
  req.ignore_eos = true;
  req.stop_ids.assign(stop_ids.begin(), stop_ids.end());
  req.stop_strings = stop_strings;
  const int32_t id = session.submit(std::move(req));
  session.run();
  const Sequence &seq = session.sequence(id);
  EXPECT_EQ(seq.status, VEGAS_OK);
  Outcome o;
  o.tokens.assign(seq.tokens.begin() + seq.n_prompt(), seq.tokens.end());
  o.text = std::string(seq.text.begin(), seq.text.end());
  o.finish = seq.finish;
  o.stats = seq.stats;
  o.free_pages_after = session.kv_pool().free_pages();
  o.pool_pages = session.kv_pool().num_pages();
  return o;
}

class SessionStopMidRound : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::shared_cpu_model(test::embedded_model_dir());
    prompt_ = test::fibonacci_prompt(*model_);
    // The free run: what both modes generate until they are told to stop.
    free_ = run(model_, false, prompt_, {}, {});
    ASSERT_EQ(free_.tokens.size(), 96u);
  }
  std::shared_ptr<Model> model_;
  std::vector<int32_t> prompt_;
  Outcome free_;
};

TEST_F(SessionStopMidRound, StopIdEndsWhereVanillaEnds) {
  // A token first generated well into the run.
  const int32_t stop = free_.tokens[40];
  const Outcome vanilla = run(model_, false, prompt_, {stop}, {});
  const Outcome vegas = run(model_, true, prompt_, {stop}, {});
  ASSERT_EQ(vanilla.finish, VEGAS_FINISH_STOP);
  EXPECT_LE(vanilla.tokens.size(), 40u);
  EXPECT_EQ(vegas.finish, VEGAS_FINISH_STOP);
  EXPECT_EQ(vegas.tokens, vanilla.tokens);
  EXPECT_EQ(vegas.text, vanilla.text);
  EXPECT_GT(vegas.stats.committed, vegas.stats.rounds) << "rounds committed one token each";
  EXPECT_EQ(vegas.free_pages_after, vegas.pool_pages);
}

TEST_F(SessionStopMidRound, StopStringEndsWhereVanillaEnds) {
  // Text the free run produces around its 50th token.
  const std::string tail = free_.text.substr(free_.text.size() / 2, 6);
  ASSERT_EQ(tail.size(), 6u);
  const Outcome vanilla = run(model_, false, prompt_, {}, {tail});
  const Outcome vegas = run(model_, true, prompt_, {}, {tail});
  ASSERT_EQ(vanilla.finish, VEGAS_FINISH_STOP);
  EXPECT_EQ(vegas.finish, VEGAS_FINISH_STOP);
  EXPECT_EQ(vegas.text, vanilla.text);
  EXPECT_EQ(vegas.tokens, vanilla.tokens);
  EXPECT_EQ(vegas.text.find(tail), std::string::npos) << "the stop string is not emitted";
  EXPECT_GT(vegas.stats.committed, vegas.stats.rounds);
  EXPECT_EQ(vegas.free_pages_after, vegas.pool_pages);
}

}  // namespace
}  // namespace vegas
