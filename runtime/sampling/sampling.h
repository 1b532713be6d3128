// Logit processing and sampling (DESIGN §6). The processed distribution is
// kept explicitly (support + probabilities) because speculative acceptance
// needs exactly the distribution a token was drawn from.
#pragma once

#include <cstdint>
#include <vector>

namespace vegas {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64;  // -1 = whole history
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
};

// Counter-based generator: draw i of a sequence is a pure function of (seed, i),
// so host and device can produce the same stream and a run is reproducible.
class Rng {
 public:
  explicit Rng(uint64_t seed) : seed_(seed) {}
  // Uniform in [0, 1), 53 random bits.
  double uniform();
  uint64_t next_u64();
  uint64_t counter() const { return counter_; }

 private:
  uint64_t seed_;
  uint64_t counter_ = 0;
};

// The distribution after every logit rule: ids sorted by descending
// probability, probabilities summing to 1 (f32).
struct TokenDistribution {
  std::vector<int32_t> ids;
  std::vector<float> probs;
  float prob_of(int32_t id) const;  // 0 outside the support
};

// Applies penalties (over `history`, the prompt and generated ids), temperature,
// top-k, top-p and min-p to `logits` (n_vocab) and fills `out`. Greedy params
// give a one-token distribution at the argmax.
void build_distribution(const float *logits, int32_t n_vocab, const SamplingParams &params,
                        const std::vector<int32_t> &history, TokenDistribution *out);

// The lowest index of the largest logit.
int32_t argmax(const float *logits, int32_t n_vocab);

// Inverse-CDF draw from `dist` with u in [0, 1).
int32_t sample_from(const TokenDistribution &dist, double u);

}  // namespace vegas
