// Token log-probabilities (vegas_request.logprobs, runtime/sampling/logprobs.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "common/error.h"
#include "kv/kv_pool.h"
#include "model/model.h"
#include "sampling/logprobs.h"
#include "session/session.h"
#include "support/model_dir.h"
#include "support/session_run.h"

namespace vegas {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Proves row_logprobs against a log-softmax computed here: the token's value,
// the alternatives in descending order with equal logits by lower id, -inf
// logits as probability 0, n_top clamped to the vocabulary, and refusals of
// rows no model produces and of tokens outside the row.
TEST(RowLogprobs, MatchesLogSoftmax) {
  const std::vector<float> row = {1.0f, 3.0f, 3.0f, -kInf, 0.5f};
  const double lse = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(0.5));
  const TokenLogprobs lp = row_logprobs(row.data(), 5, 4, 3);
  EXPECT_EQ(lp.token, 4);
  EXPECT_NEAR(lp.logprob, 0.5 - lse, 1e-6);
  ASSERT_EQ(lp.top_ids, (std::vector<int32_t>{1, 2, 0}));
  EXPECT_NEAR(lp.top_logprobs[0], 3.0 - lse, 1e-6);
  EXPECT_EQ(lp.top_logprobs[0], lp.top_logprobs[1]);
  EXPECT_NEAR(lp.top_logprobs[2], 1.0 - lse, 1e-6);

  const TokenLogprobs masked = row_logprobs(row.data(), 5, 3, 9);
  EXPECT_EQ(masked.logprob, -kInf);
  ASSERT_EQ(masked.top_ids.size(), 5u);
  EXPECT_EQ(masked.top_ids.back(), 3);
  EXPECT_TRUE(row_logprobs(row.data(), 5, 0, 0).top_ids.empty());

  auto status_of = [](const std::vector<float> &r, int32_t token) {
    try {
      row_logprobs(r.data(), static_cast<int32_t>(r.size()), token, 1);
    } catch (const Error &e) {
      return e.status();
    }
    return VEGAS_OK;
  };
  EXPECT_EQ(status_of({1.0f, std::nanf("")}, 0), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of({1.0f, kInf}, 0), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of({-kInf, -kInf}, 0), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of({1.0f, 2.0f}, 2), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of({1.0f, 2.0f}, -1), VEGAS_ERR_INVALID_ARGUMENT);
}

class SessionLogprobs : public ::testing::Test {
 protected:
  static std::shared_ptr<Model> &model() {
    return test::shared_cpu_model(test::embedded_model_dir());
  }

  struct Generated {
    std::vector<int32_t> tokens;  // prompt + generated
    int32_t n_prompt = 0;
    std::vector<TokenLogprobs> logprobs;
    SequenceStats stats;
    int32_t n_generated() const { return static_cast<int32_t>(tokens.size()) - n_prompt; }
  };

  // One request through a session with logprobs and `top` alternatives.
  static Generated generate(bool speculative, const SamplingParams &sampling, int32_t top) {
    SessionParams params;
    params.speculative = speculative;
    params.spec.gamma = 4;
    Session session(model(), params);
    SequenceRequest req;
    req.prompt.assign(prompt().begin(), prompt().end());
    req.sampling = sampling;
    req.max_tokens = kNew;
    req.ignore_eos = true;
    req.logprobs = true;
    req.top_logprobs = top;
    const int32_t id = session.submit(std::move(req));
    session.run();
    const Sequence &seq = session.sequence(id);
    EXPECT_EQ(seq.status, VEGAS_OK);
    return {std::vector<int32_t>(seq.tokens.begin(), seq.tokens.end()), seq.n_prompt(),
            seq.logprobs, seq.stats};
  }

  static const std::vector<int32_t> &prompt() {
    static const std::vector<int32_t> p = [] {
      std::vector<int32_t> t;
      for (int32_t i = 0; i < 48; ++i) t.push_back(100 + (i * 37) % 900);
      return t;
    }();
    return p;
  }

  // The model's logit rows for every position of `tokens`, from one prefill.
  static std::vector<float> all_rows(const std::vector<int32_t> &tokens) {
    const int32_t n = static_cast<int32_t>(tokens.size());
    ContextParams cp;
    cp.page_size = 16;
    cp.num_pages = (n + 15) / 16 + 1;
    cp.max_rows = n;
    // As a session's context: ids the tokenizer cannot decode are never drawn.
    if (model()->tokenizer().vocab_size() < model()->config().vocab_size)
      cp.logit_limit = model()->tokenizer().vocab_size();
    auto context = model()->backend().create_context(cp);
    KvPool pool(cp.num_pages, cp.page_size);
    std::vector<int32_t> table;
    pool.reserve(table, n);
    SeqRows r;
    r.tokens = tokens.data();
    r.n_tokens = n;
    r.start_pos = 0;
    r.page_table = table.data();
    r.n_pages = static_cast<int32_t>(table.size());
    r.logits = SeqRows::Logits::kAll;
    ForwardBatch batch;
    batch.seqs.push_back(r);
    const float *logits = context->forward(batch);
    const int64_t vocab = model()->config().vocab_size;
    return std::vector<float>(logits, logits + int64_t{n} * vocab);
  }

  // Every recorded entry against the log-softmax of the prefill row that
  // predicts its token: the token, its value, and each alternative's value
  // and rank (an alternative left out is no more probable than the last one
  // in, up to the tolerance between a decode row and a prefill row).
  static void expect_matches_prefill(const Generated &seq, int32_t top) {
    const int32_t vocab = model()->config().vocab_size;
    const std::vector<int32_t> &tokens = seq.tokens;
    ASSERT_EQ(seq.logprobs.size(), static_cast<size_t>(seq.n_generated()));
    const std::vector<float> rows = all_rows(tokens);
    constexpr float kTol = 2e-3f;
    for (int32_t g = 0; g < seq.n_generated(); ++g) {
      const TokenLogprobs &got = seq.logprobs[static_cast<size_t>(g)];
      const int32_t pos = seq.n_prompt + g;  // the token's position; row pos - 1 predicts it
      const TokenLogprobs want = row_logprobs(rows.data() + int64_t{pos - 1} * vocab, vocab,
                                              tokens[static_cast<size_t>(pos)], vocab);
      ASSERT_EQ(got.token, tokens[static_cast<size_t>(pos)]) << "token " << g;
      EXPECT_NEAR(got.logprob, want.logprob, kTol) << "token " << g;
      ASSERT_EQ(got.top_ids.size(), static_cast<size_t>(top));
      std::vector<float> by_id(static_cast<size_t>(vocab));
      for (int32_t i = 0; i < vocab; ++i)
        by_id[static_cast<size_t>(want.top_ids[i])] = want.top_logprobs[i];
      for (int32_t j = 0; j < top; ++j) {
        EXPECT_NEAR(got.top_logprobs[j], by_id[got.top_ids[j]], kTol) << g << " top " << j;
        if (j > 0) {
          EXPECT_LE(got.top_logprobs[j], got.top_logprobs[j - 1]);
        }
      }
      EXPECT_LE(want.top_logprobs[top], got.top_logprobs[top - 1] + kTol) << "token " << g;
    }
  }

  static constexpr int32_t kNew = 12;
};

// Proves vanilla decoding records, for each generated token, the model's
// log-softmax at the row that predicted it (a fresh one-pass prefill of the
// whole text as reference), greedy and sampled.
TEST_F(SessionLogprobs, VanillaMatchesAPrefillOfTheText) {
  SamplingParams sampled;
  sampled.temperature = 0.9f;
  sampled.top_k = 40;
  sampled.seed = 7;
  for (const SamplingParams &s : {SamplingParams(), sampled}) {
    const Generated seq = generate(false, s, 5);
    expect_matches_prefill(seq, 5);
    if (s.greedy()) {
      for (const TokenLogprobs &lp : seq.logprobs) EXPECT_EQ(lp.top_ids[0], lp.token);
    }
  }
}

// Proves a VEGAS session reads each committed token's entry from the verify
// row that decided it (accepted drafts, then the correction or bonus token):
// with drafts accepted, every entry equals the prefill's, greedy and sampled,
// and greedy entries equal vanilla's.
TEST_F(SessionLogprobs, SpeculativeUsesTheDecidingVerifyRow) {
  const Generated vanilla = generate(false, SamplingParams(), 4);
  const Generated greedy = generate(true, SamplingParams(), 4);
  EXPECT_GT(greedy.stats.accepted, 0) << "no draft accepted: the row mapping went untested";
  ASSERT_EQ(greedy.tokens, vanilla.tokens);
  expect_matches_prefill(greedy, 4);
  for (size_t i = 0; i < greedy.logprobs.size(); ++i)
    EXPECT_NEAR(greedy.logprobs[i].logprob, vanilla.logprobs[i].logprob, 2e-3f) << i;

  SamplingParams sampled;
  sampled.temperature = 0.8f;
  sampled.top_p = 0.95f;
  sampled.seed = 11;
  const Generated seq = generate(true, sampled, 4);
  EXPECT_GT(seq.stats.accepted, 0);
  expect_matches_prefill(seq, 4);
}

}  // namespace
}  // namespace vegas
