// speculative_accept (speculative_accept.cuh): accept_greedy and
// accept_sampled of runtime/sampling/speculative_accept.cpp, step for step,
// over warp-held candidate distributions.
#include "candidate_distribution.cuh"
#include "cuda_utils.cuh"
#include "logit_candidates.cuh"
#include "sampling_rng.cuh"
#include "speculative_accept.cuh"

namespace vegas::kernels {

namespace {

constexpr int kWarps = 4;  // sequences per block

// One candidate row of a CandidateLayout block of `rows` rows.
struct CandidateRow {
  int32_t n = 0;  // count, or a CandidateStatus
  const int32_t *ids = nullptr;
  const float *values = nullptr;
};

__device__ __forceinline__ CandidateRow candidate_row(const int32_t *block, int32_t rows,
                                                      int32_t cap, int32_t row) {
  const CandidateLayout layout{rows, cap};
  CandidateRow r;
  r.n = block[row];
  r.ids = layout.ids(block, row);
  r.values = layout.values(block, row);
  return r;
}

__device__ __forceinline__ int32_t row_status(const CandidateRow &r, int32_t cap) {
  if (r.n == kCandidatesOverflow) return kAcceptOverflow;
  return r.n >= 1 && r.n <= cap ? kAcceptOk : kAcceptBadRow;
}

// norm(max(0, p - q)) over p's support (residual_distribution); p itself when
// that is empty.
__device__ __forceinline__ WarpDistribution residual(const WarpDistribution &p,
                                                     const WarpDistribution &q, int q_n) {
  float qv[2] = {0.0f, 0.0f};
  for (int k = 0; k < q_n; ++k) {  // q_n is the same for the whole warp
    const int32_t id = __shfl_sync(kFullWarp, k < 32 ? q.id[0] : q.id[1], k & 31);
    const float prob = __shfl_sync(kFullWarp, k < 32 ? q.prob[0] : q.prob[1], k & 31);
#pragma unroll
    for (int e = 0; e < 2; ++e)
      if (p.id[e] == id) qv[e] = prob;
  }
  float r[2];
  bool keep[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    r[e] = p.prob[e] - qv[e];
    keep[e] = p.id[e] >= 0 && p.prob[e] > 0.0f && r[e] > 0.0f;
  }
  const double total =
      warp_sum_double((keep[0] ? static_cast<double>(r[0]) : 0.0) + (keep[1] ? r[1] : 0.0));
  if (!(total > 0.0)) return p;
  WarpDistribution out = p;
#pragma unroll
  for (int e = 0; e < 2; ++e)
    out.prob[e] = keep[e] ? static_cast<float>(static_cast<double>(r[e]) / total) : 0.0f;
  return out;
}

__global__ void __launch_bounds__(kWarps * 32) speculative_accept_kernel(AcceptParams p) {
  pdl_enter();
  const int s = blockIdx.x * kWarps + static_cast<int>(threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (s >= p.n_seqs) return;
  const AcceptSeq spec = p.seqs[s];
  int32_t *out = p.out + static_cast<int64_t>(s) * kAcceptRecordInts;
  const SamplingRow &rule = spec.rule;
  const bool greedy = !(rule.temperature > 0.0f);
  int32_t status = kAcceptOk, n_accepted = 0, draws = 0, token = -1;
  auto finish = [&] {
    if (lane != 0) return;
    out[0] = status;
    out[1] = n_accepted;
    out[2] = draws;
    out[3 + n_accepted] = token;
  };
  if (spec.gamma < 0 || spec.gamma > kMaxAcceptDrafts || spec.first_row < 0 ||
      spec.first_row + spec.gamma >= p.verify_rows ||
      (spec.gamma > 0 &&
       (spec.chain_row < 0 || spec.chain_row >= p.chain_rows || spec.gamma > p.chain_passes))) {
    status = kAcceptBadSpec;
    return finish();
  }
  for (int32_t i = 0; i <= spec.gamma; ++i) {
    const CandidateRow pr = candidate_row(p.verify_cands, p.verify_rows, p.cap, spec.first_row + i);
    status = row_status(pr, p.cap);
    if (status != kAcceptOk) return finish();
    const WarpDistribution target = candidate_distribution(rule, pr.n, pr.ids, pr.values, lane);
    if (i == spec.gamma) {  // every draft kept: the bonus token
      const double u = greedy ? 0.0 : uniform(rule.seed, rule.counter + draws++);
      token = warp_sample_from(target, u, lane);
      n_accepted = spec.gamma;
      if (token < 0) status = kAcceptBadRow;
      return finish();
    }
    const int32_t x = p.draft_tokens[static_cast<int64_t>(i) * p.chain_rows + spec.chain_row];
    if (greedy) {
      const int32_t argmax = warp_sample_from(target, 0.0, lane);
      if (x != argmax) {
        n_accepted = i;
        token = argmax;
        return finish();
      }
    } else {
      const CandidateRow qr =
          candidate_row(p.draft_cands + i * CandidateLayout{p.chain_rows, p.cap}.ints(),
                        p.chain_rows, p.cap, spec.chain_row);
      status = row_status(qr, p.cap);
      if (status != kAcceptOk) return finish();
      const WarpDistribution draft = candidate_distribution(rule, qr.n, qr.ids, qr.values, lane);
      const double qx = warp_prob_of(draft, x);
      if (!(qx > 0.0)) {
        status = kAcceptDraftOutside;
        return finish();
      }
      const double px = warp_prob_of(target, x);
      // u < p/q, written without the division; always true when p >= q.
      if (!(uniform(rule.seed, rule.counter + draws++) * qx < px)) {
        n_accepted = i;
        const WarpDistribution r = residual(target, draft, qr.n);
        token = warp_sample_from(r, uniform(rule.seed, rule.counter + draws++), lane);
        if (token < 0) status = kAcceptBadRow;
        return finish();
      }
    }
    if (lane == 0) out[3 + i] = x;
  }
}

}  // namespace

cudaError_t speculative_accept(const AcceptParams &p, cudaStream_t stream) {
  if (p.n_seqs == 0) return cudaSuccess;
  if (p.n_seqs < 0 || p.cap < 1 || p.cap > 64 || p.seqs == nullptr || p.verify_cands == nullptr ||
      p.out == nullptr || p.chain_rows < 0 || p.chain_passes < 0 ||
      (p.chain_rows > 0 && (p.draft_tokens == nullptr || p.draft_cands == nullptr)))
    return cudaErrorInvalidValue;
  return launch_kernel(speculative_accept_kernel, (p.n_seqs + kWarps - 1) / kWarps, kWarps * 32, 0,
                       stream, p);
}

}  // namespace vegas::kernels
