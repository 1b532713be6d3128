// Sampling on the device: one token per logit row under temperature, top-k,
// top-p and min-p, with greedy rows in the same launch. The rules, their order
// and their tie-breaking are the host's (runtime/sampling/sampling.h,
// build_distribution then sample_from), and the uniform of a row is the host
// Rng's draw `counter` for `seed`, so for the same logits the device picks the
// host's token except where a different float summation order moves an
// inverse-CDF, top-p or min-p boundary across the draw (rare). Penalties
// (rule 1) are applied first, in place, by apply_penalties from per-row token
// counts the host makes (sampling/penalties.h: penalty_counts).
//
// One block per row. A first pass finds the maximum, the argmax and bad
// logits; top-k and top-p thresholds are found by radix descent over the
// order-preserving 32-bit keys of the logits (histograms of counts or of
// softmax mass per 11-bit digit), never by sorting the vocabulary. As soon as
// the tokens above the coarse threshold fit in shared memory (the usual case)
// they are copied there in id order and every later pass reads them instead
// of the whole row; otherwise every pass reads the row (correct, slower).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace vegas::kernels {

// One row's rule: SamplingParams plus the row's Rng counter before this draw
// (greedy rows ignore seed and counter; sample() ignores the penalties).
struct SamplingRow {
  float temperature = 0.0f;  // <= 0: greedy (lowest index of the largest logit)
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  uint64_t seed = 0;
  uint64_t counter = 0;
  float repetition_penalty = 1.0f;  // apply_penalties only
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
};

// Negative values written to `out` instead of a token.
enum SampleError : int32_t {
  kSampleBadLogit = -1,   // a NaN or +inf logit
  kSampleAllMasked = -2,  // every logit is -inf
  kSampleBadParams = -3,  // a rule out of range (see validate_sampling_params)
  kSampleBadRow = -4,     // sample_candidates: a NaN or +inf logit, or none finite
};

struct SampleParams {
  const float *logits = nullptr;       // [rows][vocab]
  const SamplingRow *rules = nullptr;  // [rows], device memory
  int32_t *out = nullptr;              // [rows]: the token, or a SampleError
  int32_t rows = 0;
  int32_t vocab = 0;
};

cudaError_t sample(const SampleParams &p, cudaStream_t stream);

// sample() for rows whose logit candidates (logit_candidates.cuh, k = the
// row's top_k in 1 .. 64, or 1 for a greedy row) were already picked: the
// candidates are exactly the rows' top-k sets, so the same rules (temperature,
// top-p, min-p) and the same draw over them give sample()'s token up to float
// summation order, from 64 values instead of the vocabulary. One warp a row
// (sample_candidates.cu). A row whose candidates overflowed (ties) gets token
// 0, a valid id for what reads it next, and keeps its count's status, which
// the caller checks before trusting it; a bad row gets kSampleBadRow.
struct CandidateSampleParams {
  const int32_t *count = nullptr;      // [rows]: candidates, or a CandidateStatus
  const int32_t *ids = nullptr;        // [rows][cap], ascending
  const float *values = nullptr;       // [rows][cap]
  int32_t cap = 0;                     // <= 64
  const SamplingRow *rules = nullptr;  // [rows]; penalties are not applied
  int32_t *out = nullptr;              // [rows]: the token, or a SampleError
  int32_t rows = 0;
};

cudaError_t sample_candidates(const CandidateSampleParams &p, cudaStream_t stream);

// Token `id` occurred `count` times in the penalty window of logit row `row`.
struct PenaltyEdit {
  int32_t row = 0;
  int32_t id = 0;
  int32_t count = 0;
};

struct PenaltyParams {
  float *logits = nullptr;             // [rows][vocab], edited in place
  const SamplingRow *rules = nullptr;  // [rows]: the penalties of each row
  const PenaltyEdit *edits = nullptr;  // [n_edits], distinct (row, id) pairs
  int32_t n_edits = 0;
  int32_t rows = 0;
  int32_t vocab = 0;
};

// The host's rule 1 bit for bit: repetition (logit > 0 ? logit / r : logit *
// r), then logit -= count * frequency + presence, unfused. Edits naming a row
// or id out of range are skipped.
cudaError_t apply_penalties(const PenaltyParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
