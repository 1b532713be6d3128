// The lossless acceptance of speculative decoding (runtime/sampling/
// speculative_accept.h, DESIGN §6) on the device, for a verify pass behind a
// draft chain whose candidates are still on the device: per sequence, the
// drafts are tested against the verify rows' distributions (greedy: equal to
// the row's argmax; sampled: u * q(x) < p(x) with the sequence's next Rng
// draw), the first rejection draws from norm(max(0, p - q)) (from p when that
// is empty), and when every draft is kept the bonus token is drawn from the
// last row. Both distributions come from the rows' logit candidates with the
// sequence's rule (candidate_distribution.cuh): q is exactly the distribution
// sample_candidates drew the draft from. One warp a sequence.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "sampling.cuh"

namespace vegas::kernels {

constexpr int32_t kMaxAcceptDrafts = 32;
// One sequence's record: status, n_accepted, draws, then the n_accepted drafts
// kept and the corrected or bonus token.
constexpr int32_t kAcceptRecordInts = 3 + kMaxAcceptDrafts + 1;

enum AcceptStatus : int32_t {
  kAcceptOk = 0,
  kAcceptOverflow = 1,      // a row's candidates overflowed (ties): the host accepts
  kAcceptBadRow = 2,        // a row had a NaN or +inf logit, or no finite one
  kAcceptDraftOutside = 3,  // a draft has probability 0 under its own distribution
  kAcceptBadSpec = 4,       // gamma or a row index out of range
};

struct AcceptSeq {
  SamplingRow rule;       // counter: the sequence's Rng counter before its first acceptance draw
  int32_t first_row = 0;  // its verify rows are logit rows first_row .. first_row + gamma
  int32_t gamma = 0;      // drafts, 0 .. kMaxAcceptDrafts
  int32_t chain_row = 0;  // draft j is draft_tokens[j * chain_rows + chain_row]
};

struct AcceptParams {
  const AcceptSeq *seqs = nullptr;  // [n_seqs], device memory
  int32_t n_seqs = 0;
  // The chain: pass j's draws at draft_tokens + j * chain_rows, its candidates
  // at draft_cands + j * CandidateLayout{chain_rows, cap}.ints(), laid out so.
  const int32_t *draft_tokens = nullptr;
  const int32_t *draft_cands = nullptr;
  int32_t chain_rows = 0;
  int32_t chain_passes = 0;
  // The verify pass's candidates, CandidateLayout{verify_rows, cap}.
  const int32_t *verify_cands = nullptr;
  int32_t verify_rows = 0;
  int32_t cap = 0;         // <= 64
  int32_t *out = nullptr;  // [n_seqs][kAcceptRecordInts]
};

cudaError_t speculative_accept(const AcceptParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
