// CudaContext's device acceptance (BackendContext::begin_accept): the verify
// pass's candidates and the chain's draws and candidates never leave the
// device; one record per sequence comes back with the pass's download.
#include <algorithm>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_context.h"
#include "common/error.h"
#include "cuda_utils.cuh"
#include "sampling/sampling.h"
#include "speculative_accept.cuh"

namespace vegas::cuda {

bool CudaContext::begin_accept(const std::vector<AcceptOnDevice> &seqs) {
  static const bool enabled = kernels::variant_enabled("VEGAS_CUDA_DEVICE_ACCEPT");
  accept_pending_ = 0;
  const int32_t n = static_cast<int32_t>(seqs.size());
  if (!enabled || !pending_cand_ || n == 0 || chain_draws_ == 0) return false;
  const int32_t verify_rows = static_cast<int32_t>(pending_cand_->k.size());
  for (const AcceptOnDevice &a : seqs) {
    if (a.params == nullptr || a.params->has_penalties() || a.gamma < 0 ||
        a.gamma > kernels::kMaxAcceptDrafts || a.gamma > chain_steps_ || a.first_row < 0 ||
        a.first_row + a.gamma >= verify_rows ||
        (a.gamma > 0 && (a.chain_row < 0 || a.chain_row >= chain_rows_)))
      return false;
  }
  const size_t spec_bytes = seqs.size() * sizeof(kernels::AcceptSeq);
  const size_t out_bytes = seqs.size() * kernels::kAcceptRecordInts * sizeof(int32_t);
  if (accept_seqs_.bytes() < spec_bytes || accept_out_.bytes() < out_bytes) {
    // Growing frees buffers a queued kernel may still read.
    check(cudaStreamSynchronize(stream_), "stream sync");
    accept_seqs_.allocate(std::max(accept_seqs_.bytes(), spec_bytes), "device acceptance");
    accept_out_.allocate(std::max(accept_out_.bytes(), out_bytes), "device acceptance");
  }
  accept_seqs_host_.reserve(spec_bytes, "device acceptance");
  accept_out_host_.reserve(out_bytes, "device acceptance");
  auto *specs = accept_seqs_host_.get<kernels::AcceptSeq>();
  for (int32_t i = 0; i < n; ++i) {
    const AcceptOnDevice &a = seqs[static_cast<size_t>(i)];
    RowSampling rule;
    rule.params = a.params;
    rule.rng_counter = a.rng_counter;
    fill_rules(&rule, 1, 0, &specs[i].rule);
    specs[i].first_row = a.first_row;
    specs[i].gamma = a.gamma;
    specs[i].chain_row = a.gamma > 0 ? a.chain_row : 0;
  }
  check(cudaMemcpyAsync(accept_seqs_.get(), specs, spec_bytes, cudaMemcpyHostToDevice, stream_),
        "upload of acceptance specs");
  constexpr int32_t cap = kMaxCandidateTopK;
  kernels::AcceptParams p;
  p.seqs = accept_seqs_.get<kernels::AcceptSeq>();
  p.n_seqs = n;
  p.draft_tokens = chain_out_.get<int32_t>();
  p.draft_cands = p.draft_tokens + int64_t{chain_steps_} * chain_rows_;
  p.draft_pass_ints = int64_t{chain_rows_} * (1 + 2 * cap);
  p.chain_rows = chain_rows_;
  p.chain_passes = chain_steps_;
  p.verify_cands = cand_out_.get<int32_t>();
  p.verify_rows = verify_rows;
  p.cap = cap;
  p.out = accept_out_.get<int32_t>();
  check(kernels::speculative_accept(p, stream_), "speculative_accept");
  check(cudaMemcpyAsync(accept_out_host_.get(), p.out, out_bytes, cudaMemcpyDeviceToHost, stream_),
        "acceptance download");
  accept_pending_ = n;
  return true;
}

void CudaContext::end_accept(std::vector<AcceptedOnDevice> *out) {
  if (accept_pending_ == 0) fail(VEGAS_ERR_INTERNAL, "end_accept without an acceptance begun");
  if (pending_cand_) fail(VEGAS_ERR_INTERNAL, "end_accept before end_candidates");
  const int32_t n = accept_pending_;
  accept_pending_ = 0;
  out->resize(static_cast<size_t>(n));
  const int32_t *host = accept_out_host_.get<int32_t>();
  for (int32_t i = 0; i < n; ++i) {
    const int32_t *rec = host + int64_t{i} * kernels::kAcceptRecordInts;
    AcceptedOnDevice &a = (*out)[static_cast<size_t>(i)];
    a.ok = rec[0] == kernels::kAcceptOk && rec[1] >= 0 && rec[1] <= kernels::kMaxAcceptDrafts;
    a.n_accepted = a.ok ? rec[1] : 0;
    a.draws = a.ok ? static_cast<uint64_t>(rec[2]) : 0;
    a.tokens.assign(a.ok ? rec + 3 : rec, a.ok ? rec + 3 + rec[1] + 1 : rec);
  }
}

}  // namespace vegas::cuda
