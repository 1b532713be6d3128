// Chained vanilla decode steps on the CUDA backend (label `gpu`,
// SessionParams::vanilla_chain): a session that runs its decode steps four at
// a time must produce exactly the tokens of one that runs them one by one,
// greedy and sampled (the device draws each chained step from the step's
// candidates with the counter a plain step would use), with different
// max_tokens (a chain never runs past a sequence's last token: it is shorter
// there), a sequence stopped by its callback, and more sequences arriving
// while others decode (steps with prompt rows are plain).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../unit/speculative_test_data.h"
#include "model/model.h"
#include "session/session.h"

namespace vegas {
namespace {

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;  // generated, per request
  std::vector<vegas_finish_reason> reasons;
  std::vector<int32_t> callbacks;  // callback calls per request
  int64_t chained_steps = 0;
};

struct CallbackState {
  int32_t calls = 0;
  int32_t stop_at = -1;  // return non-zero at this call
};

int32_t count_and_stop(int32_t, int32_t, const char *, size_t, void *user) {
  auto *st = static_cast<CallbackState *>(user);
  return st->calls++ == st->stop_at ? 1 : 0;
}

// Eight prompts: four at once, then four more submitted after two steps.
Outcome run(const std::shared_ptr<Model> &model, const std::vector<std::vector<int32_t>> &prompts,
            const SamplingParams &sampling, int32_t chain) {
  SessionParams params;
  params.vanilla_chain = chain;
  Session session(model, params);
  Outcome out;
  std::vector<CallbackState> states(prompts.size());
  std::vector<int32_t> ids;
  auto submit = [&](size_t i) {
    SequenceRequest req;
    req.prompt.assign(prompts[i].begin(), prompts[i].end());
    req.sampling = sampling;
    req.sampling.seed = 100 + i;
    req.max_tokens = 29 + static_cast<int32_t>(i);  // chains end mid-sequence
    req.ignore_eos = true;
    if (i == 2) states[i].stop_at = 9;  // the callback stops it inside a chain
    req.on_token = count_and_stop;
    req.user_data = &states[i];
    ids.push_back(session.submit(std::move(req)));
  };
  for (size_t i = 0; i < 4; ++i) submit(i);
  session.step();
  session.step();
  for (size_t i = 4; i < prompts.size(); ++i) submit(i);
  session.run();
  out.chained_steps = session.chained_steps();
  for (size_t i = 0; i < ids.size(); ++i) {
    const Sequence &seq = session.sequence(ids[i]);
    EXPECT_EQ(seq.status, VEGAS_OK);
    out.tokens.emplace_back(seq.tokens.begin() + seq.n_prompt(), seq.tokens.end());
    out.reasons.push_back(seq.finish);
    out.callbacks.push_back(states[i].calls);
  }
  return out;
}

TEST(CudaVanillaChain, EqualsStepByStep) {
  if (!test::have_model_and_prompts()) GTEST_SKIP() << "embedded model or prompts absent";
  ModelLoadOptions options;
  options.backend_auto = false;
  options.backend = BackendKind::kCuda;
  const auto model = Model::load(test::embedded_model_dir(), options);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto &p : test::load_public_prompts(model->tokenizer(), "-2k")) {
    prompts.push_back(p.ids);
    if (prompts.size() == 8) break;
  }
  ASSERT_EQ(prompts.size(), 8u);
  SamplingParams sampled;
  sampled.temperature = 0.6f;
  sampled.top_k = 20;
  sampled.top_p = 0.95f;
  for (const SamplingParams &s : {SamplingParams(), sampled}) {
    const Outcome one = run(model, prompts, s, 1);
    const Outcome four = run(model, prompts, s, 4);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(four.tokens[i], one.tokens[i]) << "request " << i << (s.greedy() ? " greedy" : "");
      EXPECT_EQ(four.reasons[i], one.reasons[i]) << "request " << i;
      EXPECT_EQ(four.callbacks[i], one.callbacks[i]) << "request " << i;
    }
    EXPECT_EQ(one.chained_steps, 0);
    // Four chains at least (28 measured on the H100): the comparison covers chained steps.
    EXPECT_GE(four.chained_steps, 16) << "the chained session ran too few chains";
    EXPECT_EQ(one.reasons[2], VEGAS_FINISH_CALLBACK);
    EXPECT_EQ(one.tokens[2].size(), 10u);
    EXPECT_EQ(one.tokens[0].size(), 29u);
  }
}

}  // namespace
}  // namespace vegas
