// Token log-probabilities (vegas_request.logprobs, runtime/sampling/logprobs.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "common/error.h"
#include "logprobs_checks.h"
#include "sampling/logprobs.h"
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

std::vector<int32_t> short_prompt() {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < 48; ++i) t.push_back(100 + (i * 37) % 900);
  return t;
}

// Decode and prefill rows of the CPU backend differ only by f32 summation order.
constexpr float kCpuTolerance = 2e-3f;

// Proves vanilla decoding records, for each generated token, the model's
// log-softmax at the row that predicted it (a fresh one-pass prefill of the
// whole text as reference), greedy and sampled.
TEST(SessionLogprobs, VanillaMatchesAPrefillOfTheText) {
  test::check_vanilla_logprobs(test::shared_cpu_model(test::embedded_model_dir()), short_prompt(),
                               12, kCpuTolerance);
}

// Proves a VEGAS session reads each committed token's entry from the verify
// row that decided it (accepted drafts, then the correction or bonus token):
// an off-by-one there fails it (tried).
TEST(SessionLogprobs, SpeculativeUsesTheDecidingVerifyRow) {
  test::check_speculative_logprobs(test::shared_cpu_model(test::embedded_model_dir()),
                                   short_prompt(), 12, kCpuTolerance, /*exact_greedy=*/true);
}

// Proves processed logprobs (VEGAS_LOGPROBS_PROCESSED) are those of the
// distribution each token was drawn from: build_distribution of the prefill
// row that predicts it under the request's rule, in vanilla and VEGAS mode;
// greedy has its token alone at log-probability 0.
TEST(SessionLogprobs, ProcessedAreTheDistributionDrawnFrom) {
  const auto &model = test::shared_cpu_model(test::embedded_model_dir());
  const int32_t vocab = model->config().vocab_size;
  SamplingParams sampled;
  sampled.temperature = 0.8f;
  sampled.top_k = 5;
  sampled.top_p = 0.9f;
  sampled.seed = 3;
  for (bool speculative : {false, true}) {
    for (const SamplingParams &s : {SamplingParams(), sampled}) {
      const test::Generated seq =
          test::generate_with_logprobs(model, short_prompt(), speculative, s, 3, 12, true);
      ASSERT_EQ(seq.logprobs.size(), static_cast<size_t>(seq.n_generated()));
      const std::vector<float> rows = test::prefill_rows(*model, seq.tokens);
      for (int32_t g = 0; g < seq.n_generated(); ++g) {
        const TokenLogprobs &got = seq.logprobs[static_cast<size_t>(g)];
        const int32_t pos = seq.n_prompt + g;
        TokenDistribution dist;
        build_distribution(rows.data() + int64_t{pos - 1} * vocab, vocab, s, {}, &dist);
        const int32_t token = seq.tokens[static_cast<size_t>(pos)];
        ASSERT_EQ(got.token, token);
        EXPECT_NEAR(got.logprob, std::log(dist.prob_of(token)), kCpuTolerance) << g;
        ASSERT_LE(got.top_ids.size(), static_cast<size_t>(dist.size()));
        for (size_t j = 0; j < got.top_ids.size(); ++j)
          EXPECT_NEAR(got.top_logprobs[j], std::log(dist.prob_of(got.top_ids[j])), kCpuTolerance);
        if (s.greedy()) {
          EXPECT_EQ(got.logprob, 0.0f);
          EXPECT_EQ(got.top_ids, std::vector<int32_t>{token});
        }
      }
    }
  }
}

}  // namespace
}  // namespace vegas
