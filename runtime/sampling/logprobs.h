// Log-probabilities of generated tokens (vegas_request.logprobs): the token's
// and its most probable alternatives' log_softmax over the raw logit row, the
// model's own distribution, before penalties, temperature and truncation (what
// OpenAI's logprobs and vLLM's default report).
#pragma once

#include <cstdint>
#include <vector>

#include "sampling/sampling.h"

namespace vegas {

struct TokenLogprobs {
  int32_t token = -1;
  float logprob = 0.0f;
  // The most probable tokens first; equal logits: the lower id first.
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
};

// Token `token`'s entry from one logit row of `vocab` logits with `n_top`
// alternatives (at most vocab). The log-sum-exp is taken in double; -inf
// logits count as probability 0. Throws INVALID_ARGUMENT (as sampling does)
// for a row whose logits are all -inf or hold NaN / +inf, or a token outside it.
TokenLogprobs row_logprobs(const float *row, int32_t vocab, int32_t token, int32_t n_top);

// The same from the processed distribution the token was drawn from (after
// penalties, temperature, top-k, top-p and min-p: build_distribution's):
// tokens outside its support have log-probability -inf, and the alternatives
// are its most probable members (at most its size; greedy: the argmax alone,
// log-probability 0).
TokenLogprobs distribution_logprobs(const TokenDistribution &dist, int32_t token, int32_t n_top);

}  // namespace vegas
