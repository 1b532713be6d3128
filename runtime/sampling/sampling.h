// Logit processing and sampling (DESIGN §6). The processed distribution is
// kept explicitly (support + probabilities) because speculative acceptance
// needs exactly the distribution a token was drawn from.
//
// Order of the logit rules (build_distribution):
//   1. penalties over the last `penalty_last_n` history tokens: repetition
//      (HF/llama.cpp: logit > 0 ? logit / r : logit * r, once per distinct token),
//      then presence and frequency (OpenAI: logit -= count * f + (count > 0) * p);
//   2. temperature, 3. top-k, 4. top-p, 5. min-p, 6. renormalise.
// Steps 2-5 follow Hugging Face transformers (llama.cpp applies them in another
// order), including HF's top-k rule of keeping every token tied with the k-th
// largest logit. Greedy (temperature 0) applies the penalties, then takes the
// argmax (lowest id on ties).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace vegas {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // 1 = off; keep the smallest top set with mass >= top_p
  float min_p = 0.0f;        // 0 = off; keep tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64;  // -1 = whole history, 0 = no penalties
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
  bool has_penalties() const {
    return penalty_last_n != 0 &&
           (repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
  }
};

// Throws vegas::Error(INVALID_ARGUMENT) naming the first field out of range.
void validate_sampling_params(const SamplingParams &params);

// Counter-based generator: draw i of a sequence is a pure function of (seed, i)
// (a SplitMix64-style integer hash), so host and device can produce the same
// stream, a run is reproducible, and a stream can be rewound with set_counter.
class Rng {
 public:
  explicit Rng(uint64_t seed) : seed_(seed) {}
  // Uniform in [0, 1), 53 random bits.
  double uniform();
  uint64_t next_u64();
  uint64_t counter() const { return counter_; }
  void set_counter(uint64_t counter) { counter_ = counter; }
  // Past n draws made elsewhere (on the device) with this stream.
  void skip(uint64_t n) { counter_ += n; }

  // The value of draw `counter` for `seed`, without any state.
  static uint64_t hash(uint64_t seed, uint64_t counter);

 private:
  uint64_t seed_;
  uint64_t counter_ = 0;
};

// The distribution after every logit rule: the support in ascending id order
// and its probabilities (f32, summing to 1 up to rounding; every entry > 0 unless
// the softmax underflowed). Ascending id order makes prob_of a binary search and
// lets two distributions be merged in linear time (speculative residuals); it
// also means a full-vocabulary distribution needs no sort.
struct TokenDistribution {
  std::vector<int32_t> ids;
  std::vector<float> probs;
  float prob_of(int32_t id) const;  // 0 outside the support
  int32_t size() const { return static_cast<int32_t>(ids.size()); }
};

// Applies the rules listed above to `logits` (n_vocab entries; -inf masks a
// token, NaN and +inf are errors) and fills `out`. `history` holds the prompt
// and generated ids; only its last penalty_last_n entries are read.
// Errors: INVALID_ARGUMENT (bad params, NaN/+inf logit, every logit -inf),
// TOKEN_OUT_OF_RANGE (a history id outside [0, n_vocab)).
void build_distribution(const float *logits, int32_t n_vocab, const SamplingParams &params,
                        const std::vector<int32_t> &history, TokenDistribution *out);

// A logit row cut down to what its processed distribution reads: with top-k
// on (k >= 1; greedy rows need k = 1), the finite logits at or above the k-th
// largest finite one, ties included, in ascending id order (every finite
// logit when there are no more than k). build_distribution on the whole row
// and build_distribution_from_candidates on these give the same distribution
// bit for bit, so a backend can pick the candidates where the logits are and
// send the host a few pairs instead of the vocabulary
// (BackendContext::forward_candidates).
struct LogitCandidates {
  std::vector<int32_t> ids;  // ascending
  std::vector<float> logits;
};

// Candidates are used for k up to this (device buffers hold this many per row).
constexpr int32_t kMaxCandidateTopK = 64;

// The k whose candidates `params` reads: 1 for greedy, top_k for top_k in
// [1, kMaxCandidateTopK], else 0 (the rule reads the whole row: top-k off or
// large, or penalties, which edit logits outside any candidate set).
int32_t candidate_k(const SamplingParams &params);

// The candidates of a row for k >= 1. Errors as build_distribution's:
// INVALID_ARGUMENT for a NaN or +inf logit, or every logit -inf.
void extract_candidates(const float *logits, int32_t n_vocab, int32_t k, LogitCandidates *out);

// build_distribution's result for a row whose candidates for candidate_k(params)
// (or any larger k) are `c`. INVALID_ARGUMENT for bad params, params with
// penalties or top-k off (candidate_k(params) == 0), empty or non-finite
// candidates, or ids not ascending.
void build_distribution_from_candidates(const LogitCandidates &c, const SamplingParams &params,
                                        TokenDistribution *out);

// A logit row's largest finite logit and how many are finite. Throws
// INVALID_ARGUMENT for NaN or +inf, or a row with no finite logit.
struct LogitScan {
  float max = -INFINITY;
  int32_t n_finite = 0;
};
LogitScan scan_logits(const float *logits, int32_t n_vocab);

// The lowest index of the largest logit (NaN entries are never chosen).
int32_t argmax(const float *logits, int32_t n_vocab);

// Inverse-CDF draw from `dist` with u in [0, 1), walking the support in id order.
int32_t sample_from(const TokenDistribution &dist, double u);

}  // namespace vegas
