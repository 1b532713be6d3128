// The 6-token Markov "model" of the speculative losslessness tests
// (test_speculative_accept for chains, test_tree_accept for trees): the
// target's next-token distribution P[prev] and the draft's Q[prev] depend on
// the previous token. P rows use top-k 4 (so the draft proposes tokens the
// target never emits) and Q rows use top-p 0.9 (so the target has tokens only
// a residual can produce). Speculative decoding from context token 0 must
// commit tokens distributed exactly as plain sampling from P: y1 ~ P[0],
// y2 ~ P[y1], which judge() tests by chi-square.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "chi_square.h"
#include "sampling/sampling.h"

namespace vegas::test {

constexpr int32_t kMarkovVocab = 6;

struct MarkovModel {
  std::vector<TokenDistribution> target, draft;  // indexed by the previous token
};

inline TokenDistribution markov_row(uint64_t seed, const SamplingParams &sp) {
  Rng rng(seed);
  std::vector<float> logits(kMarkovVocab);
  for (float &x : logits) x = static_cast<float>(3.0 * rng.uniform() - 1.5);
  TokenDistribution d;
  build_distribution(logits.data(), kMarkovVocab, sp, {}, &d);
  return d;
}

inline MarkovModel make_markov_model() {
  SamplingParams target_params, draft_params;
  target_params.temperature = draft_params.temperature = 1.0f;
  target_params.top_k = 4;
  draft_params.top_p = 0.9f;
  MarkovModel m;
  for (int32_t a = 0; a < kMarkovVocab; ++a) {
    m.target.push_back(markov_row(1000 + a, target_params));
    m.draft.push_back(markov_row(2000 + a, draft_params));
  }
  return m;
}

// Counts of the first committed token and of the first two, per trial.
struct MarkovCounts {
  std::vector<int64_t> first = std::vector<int64_t>(kMarkovVocab, 0);
  std::vector<int64_t> pairs = std::vector<int64_t>(kMarkovVocab * kMarkovVocab, 0);
};

struct MarkovVerdict {
  ChiSquare first, pairs;
};

// Chi-square of the counts against y1 ~ P[0], (y1, y2) ~ P[0](y1) P[y1](y2).
inline MarkovVerdict judge_markov(const MarkovModel &m, const MarkovCounts &c) {
  std::vector<double> first(kMarkovVocab), pairs(kMarkovVocab * kMarkovVocab);
  for (int32_t a = 0; a < kMarkovVocab; ++a) {
    first[a] = m.target[0].prob_of(a);
    for (int32_t b = 0; b < kMarkovVocab; ++b)
      pairs[a * kMarkovVocab + b] = m.target[0].prob_of(a) * m.target[a].prob_of(b);
  }
  int64_t trials = 0;
  for (const int64_t n : c.first) trials += n;
  for (const double e : pairs)  // the chi-square approximation needs >= 5 expected per cell
    if (e > 0.0 && e * static_cast<double>(trials) < 5.0)
      throw std::logic_error("Markov test model has a tiny cell");
  return MarkovVerdict{chi_square(c.first, first), chi_square(c.pairs, pairs)};
}

}  // namespace vegas::test
