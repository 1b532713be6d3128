// One request through a Session, the way the speculative tests compare a
// session with plain decoding: eos ignored, max_tokens new tokens, greedy
// unless sampled.
// Shared by test_speculative_lossless, test_auto_tuning, test_cpu_quest_draft,
// test_hybrid_rounds and tests/gpu/test_cuda_vegas.cpp.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/model.h"
#include "session/session.h"
#include "speculative/speculative_decoder.h"

namespace vegas::test {

// One request (eos ignored) through a Session with the given sampling: the
// generated tokens (the prompt left out), the sequence's statistics when
// `stats` is given, and the session's speculative totals when `totals` is.
inline std::vector<int32_t> sampled_session_tokens(
    const std::shared_ptr<Model> &model, const SessionParams &params,
    const std::vector<int32_t> &prompt, int32_t max_tokens, const SamplingParams &sampling,
    SequenceStats *stats = nullptr, SpeculativeTotals *totals = nullptr) {
  Session session(model, params);
  SequenceRequest req;
  req.prompt.assign(prompt.begin(), prompt.end());
  req.max_tokens = max_tokens;
  req.ignore_eos = true;
  req.sampling = sampling;
  const int32_t id = session.submit(std::move(req));
  session.run();
  const Sequence &seq = session.sequence(id);
  EXPECT_EQ(seq.status, VEGAS_OK) << (params.speculative ? params.spec.policy : "vanilla");
  if (stats) *stats = seq.stats;
  if (totals && session.speculative()) *totals = session.speculative()->totals();
  return {seq.tokens.begin() + seq.n_prompt(), seq.tokens.end()};
}

// The same, greedy.
inline std::vector<int32_t> session_tokens(const std::shared_ptr<Model> &model,
                                           const SessionParams &params,
                                           const std::vector<int32_t> &prompt, int32_t max_tokens,
                                           SequenceStats *stats = nullptr) {
  return sampled_session_tokens(model, params, prompt, max_tokens, SamplingParams{}, stats);
}

// Speculative session parameters where `draft` drafts (a separate draft model,
// γ at its default), its passes seeing the last `window` tokens (0 = all).
inline SessionParams with_draft(std::shared_ptr<Model> draft, int32_t window = 0) {
  SessionParams sp;
  sp.speculative = true;
  sp.spec.draft_model = true;
  sp.spec.draft_window = window;
  sp.draft_model = std::move(draft);
  return sp;
}

// A model on the CPU backend loaded once per test binary (the embedded one).
inline std::shared_ptr<Model> &shared_cpu_model(const std::string &dir) {
  static std::shared_ptr<Model> model;
  if (!model) {
    ModelLoadOptions options;
    options.backend_auto = false;
    model = Model::load(dir, options);
  }
  return model;
}

// A short code prompt whose continuation the embedded model drafts well
// (several tokens a round), in the model's ids.
inline std::vector<int32_t> fibonacci_prompt(const Model &model) {
  return model.tokenizer().encode(
      "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n"
      "        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n\n"
      "def factorial(n):\n",
      false, true);
}

// fibonacci_prompt `times` over: code that repeats itself, so that prompt
// lookup drafts several tokens a round for no draft pass.
inline std::vector<int32_t> repeated_fibonacci_prompt(const Model &model, int times) {
  const std::vector<int32_t> piece = fibonacci_prompt(model);
  std::vector<int32_t> prompt;
  for (int i = 0; i < times; ++i) prompt.insert(prompt.end(), piece.begin(), piece.end());
  return prompt;
}

}  // namespace vegas::test
