// Session logprobs checks shared by the CPU test (tests/unit/test_logprobs.cpp)
// and the CUDA one (tests/gpu/test_cuda_logprobs.cpp): each generated token's
// entry against the log-softmax of the row that predicts it in a one-pass
// prefill of the whole text, in vanilla and VEGAS sessions.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_pool.h"
#include "model/model.h"
#include "sampling/logprobs.h"
#include "session/session.h"

namespace vegas::test {

struct Generated {
  std::vector<int32_t> tokens;  // prompt + generated
  int32_t n_prompt = 0;
  std::vector<TokenLogprobs> logprobs;
  SequenceStats stats;
  int32_t n_generated() const { return static_cast<int32_t>(tokens.size()) - n_prompt; }
};

// One request through a session with logprobs and `top` alternatives.
inline Generated generate_with_logprobs(const std::shared_ptr<Model> &model,
                                        const std::vector<int32_t> &prompt, bool speculative,
                                        const SamplingParams &sampling, int32_t top,
                                        int32_t max_tokens, bool processed = false) {
  SessionParams params;
  params.speculative = speculative;
  params.spec.gamma = 4;
  Session session(model, params);
  SequenceRequest req;
  req.prompt.assign(prompt.begin(), prompt.end());
  req.sampling = sampling;
  req.max_tokens = max_tokens;
  req.ignore_eos = true;
  req.logprobs = true;
  req.processed_logprobs = processed;
  req.top_logprobs = top;
  const int32_t id = session.submit(std::move(req));
  session.run();
  const Sequence &seq = session.sequence(id);
  EXPECT_EQ(seq.status, VEGAS_OK);
  return {std::vector<int32_t>(seq.tokens.begin(), seq.tokens.end()), seq.n_prompt(), seq.logprobs,
          seq.stats};
}

// The model's logit rows for every position of `tokens`, from one prefill.
inline std::vector<float> prefill_rows(const Model &model, const std::vector<int32_t> &tokens) {
  const int32_t n = static_cast<int32_t>(tokens.size());
  ContextParams cp;
  cp.page_size = 16;
  cp.num_pages = (n + 15) / 16 + 1;
  cp.max_rows = n;
  // As a session's context: ids the tokenizer cannot decode are never drawn.
  if (model.tokenizer().vocab_size() < model.config().vocab_size)
    cp.logit_limit = model.tokenizer().vocab_size();
  auto context = model.backend().create_context(cp);
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
  const int64_t vocab = model.config().vocab_size;
  return std::vector<float>(logits, logits + int64_t{n} * vocab);
}

// Every recorded entry against the log-softmax of the prefill row that
// predicts its token: the token, its value, and each alternative's value and
// rank (an alternative left out is no more probable than the last one in), up
// to `tol`, the difference between a decode row and a prefill row.
inline void expect_matches_prefill(const Model &model, const Generated &seq, int32_t top,
                                   float tol) {
  const int32_t vocab = model.config().vocab_size;
  const std::vector<int32_t> &tokens = seq.tokens;
  ASSERT_EQ(seq.logprobs.size(), static_cast<size_t>(seq.n_generated()));
  const std::vector<float> rows = prefill_rows(model, tokens);
  for (int32_t g = 0; g < seq.n_generated(); ++g) {
    const TokenLogprobs &got = seq.logprobs[static_cast<size_t>(g)];
    const int32_t pos = seq.n_prompt + g;  // the token's position; row pos - 1 predicts it
    const TokenLogprobs want = row_logprobs(rows.data() + int64_t{pos - 1} * vocab, vocab,
                                            tokens[static_cast<size_t>(pos)], vocab);
    ASSERT_EQ(got.token, tokens[static_cast<size_t>(pos)]) << "token " << g;
    EXPECT_NEAR(got.logprob, want.logprob, tol) << "token " << g;
    ASSERT_EQ(got.top_ids.size(), static_cast<size_t>(top));
    std::vector<float> by_id(static_cast<size_t>(vocab));
    for (int32_t i = 0; i < vocab; ++i)
      by_id[static_cast<size_t>(want.top_ids[i])] = want.top_logprobs[i];
    for (int32_t j = 0; j < top; ++j) {
      EXPECT_NEAR(got.top_logprobs[j], by_id[got.top_ids[j]], tol) << g << " top " << j;
      if (j > 0) {
        EXPECT_LE(got.top_logprobs[j], got.top_logprobs[j - 1]);
      }
    }
    EXPECT_LE(want.top_logprobs[top], got.top_logprobs[top - 1] + tol) << "token " << g;
  }
}

// Vanilla, greedy and sampled: entries match the prefill; greedy tokens are
// their own most probable alternative.
inline void check_vanilla_logprobs(const std::shared_ptr<Model> &model,
                                   const std::vector<int32_t> &prompt, int32_t max_tokens,
                                   float tol) {
  SamplingParams sampled;
  sampled.temperature = 0.9f;
  sampled.top_k = 40;
  sampled.seed = 7;
  for (const SamplingParams &s : {SamplingParams(), sampled}) {
    const Generated seq = generate_with_logprobs(model, prompt, false, s, 5, max_tokens);
    expect_matches_prefill(*model, seq, 5, tol);
    if (s.greedy()) {
      for (const TokenLogprobs &lp : seq.logprobs) EXPECT_EQ(lp.top_ids[0], lp.token);
    }
  }
}

// VEGAS: each committed token's entry comes from the verify row that decided
// it; with drafts accepted, entries match the prefill (greedy and sampled)
// and greedy entries match vanilla's (`exact_greedy`: the greedy tokens must be
// vanilla's; else, on a GPU, up to the first near tie).
inline void check_speculative_logprobs(const std::shared_ptr<Model> &model,
                                       const std::vector<int32_t> &prompt, int32_t max_tokens,
                                       float tol, bool exact_greedy) {
  const Generated vanilla =
      generate_with_logprobs(model, prompt, false, SamplingParams(), 4, max_tokens);
  const Generated greedy =
      generate_with_logprobs(model, prompt, true, SamplingParams(), 4, max_tokens);
  EXPECT_GT(greedy.stats.accepted, 0) << "no draft accepted: the row mapping went untested";
  if (exact_greedy) {
    ASSERT_EQ(greedy.tokens, vanilla.tokens);
  }
  expect_matches_prefill(*model, greedy, 4, tol);
  // Greedy tokens agree up to the first near tie; compare entries up to there.
  size_t same = 0;
  while (same < greedy.tokens.size() && same < vanilla.tokens.size() &&
         greedy.tokens[same] == vanilla.tokens[same])
    ++same;
  for (size_t i = 0; i + static_cast<size_t>(greedy.n_prompt) < same &&
                     i < greedy.logprobs.size() && i < vanilla.logprobs.size();
       ++i)
    EXPECT_NEAR(greedy.logprobs[i].logprob, vanilla.logprobs[i].logprob, tol) << i;

  SamplingParams sampled;
  sampled.temperature = 0.8f;
  sampled.top_p = 0.95f;
  sampled.seed = 11;
  const Generated seq = generate_with_logprobs(model, prompt, true, sampled, 4, max_tokens);
  EXPECT_GT(seq.stats.accepted, 0);
  expect_matches_prefill(*model, seq, 4, tol);
}

}  // namespace vegas::test
