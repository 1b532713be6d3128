// Data of the host-side sampling benchmarks: logit rows shaped like a
// language model's, and the sampling rule of the Vegas benchmark (issue P0-4).
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "sampling/sampling.h"

namespace vegas::bench {

// Zipf-like in rank (18 - 1.6 ln(1 + rank)), ranks shuffled over the
// vocabulary, plus `noise` x N(0, 1). One row into `row` (vocab entries); returns the id of rank 0.
inline int llm_row(float *row, int vocab, float noise, std::mt19937 &rng) {
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<int> perm(static_cast<size_t>(vocab));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int i = 0; i < vocab; ++i)
    row[perm[i]] = 18.f - 1.6f * std::log(1.f + i) + (noise > 0.f ? noise * n(rng) : 0.f);
  return perm[0];
}

// T 0.6, top-k 20, top-p 0.95.
inline SamplingParams vegas_bench_rule() {
  SamplingParams p;
  p.temperature = 0.6f;
  p.top_k = 20;
  p.top_p = 0.95f;
  return p;
}

}  // namespace vegas::bench
