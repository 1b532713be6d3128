// Logit candidates on the device (runtime/sampling/sampling.h,
// extract_candidates): per row, every finite logit at or above the k-th
// largest finite one, ties included, in ascending id order, so that a few
// (id, logit) pairs cross to the host instead of the vocabulary row.
//
// One block per row. The k-th largest is found by radix descent, 8 bits a
// pass, over order-preserving 32-bit keys of the logits (each pass counts the
// keys under the prefix found so far; a row of up to 8192 logits is held in
// registers; a longer one is cut into chunks of 8192 that a block each
// selects from, then one block merges their candidates, given scratch; else
// it stays in L1/L2 between passes; VEGAS_CUDA_CANDIDATES_IN_REGISTERS=0
// reads every row from memory, for A/B), then the row is compacted in id
// order by a block scan. Only comparisons: the result equals the host's bit
// for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace vegas::kernels {

// Negative values written to `count` instead of a candidate count.
enum CandidateStatus : int32_t {
  kCandidatesOverflow = -1,  // more than `cap` candidates (ties at the k-th logit)
  kCandidatesBadRow = -2,    // a NaN or +inf logit, or no finite one
};

// Where `rows` rows of candidates lie in one int32 block, the form in which
// passes, the draft chain and the acceptance hand them on:
// [count: rows][ids: rows x cap][values, float bits: rows x cap].
struct CandidateLayout {
  int32_t rows = 0;
  int32_t cap = 0;

  __host__ __device__ constexpr int64_t ints() const {
    return int64_t{rows} * (1 + 2 * int64_t{cap});
  }
  template <typename Int>
  __host__ __device__ Int *ids(Int *block, int64_t row = 0) const {
    return block + rows + row * cap;
  }
  __host__ __device__ float *values(int32_t *block, int64_t row = 0) const {
    return reinterpret_cast<float *>(block + rows + int64_t{rows} * cap + row * cap);
  }
  __host__ __device__ const float *values(const int32_t *block, int64_t row = 0) const {
    return reinterpret_cast<const float *>(block + rows + int64_t{rows} * cap + row * cap);
  }
};

struct CandidateParams {
  const float *logits = nullptr;  // [rows][vocab]
  const int32_t *k = nullptr;     // [rows], >= 1 (values below 1 count as 1)
  int32_t *count = nullptr;       // [rows]: candidates written, or a CandidateStatus
  int32_t *ids = nullptr;         // [rows][cap], ascending
  float *values = nullptr;        // [rows][cap], the logits of ids
  int32_t rows = 0;
  int32_t vocab = 0;
  int32_t cap = 0;
  // Rows longer than 8192: logit_candidates_scratch_ints(rows, vocab, cap)
  // ints for each chunk of 8192's candidates, so that the chunks take a block
  // each before one block per row merges them; null: one block per row reads
  // the row at every pass (ten times slower at Qwen's 151,936 logits).
  int32_t *scratch = nullptr;
};

int64_t logit_candidates_scratch_ints(int32_t rows, int32_t vocab, int32_t cap);
cudaError_t logit_candidates(const CandidateParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
