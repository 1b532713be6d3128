#include "backend/cuda/device_acceptance.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "common/error.h"
#include "sampling/sampling.h"

namespace vegas::cuda {

void DeviceAcceptance::begin(cudaStream_t stream, const std::vector<kernels::AcceptSeq> &specs,
                             const Chain &chain, const Candidates &verify) {
  pending_ = 0;
  const int32_t n = static_cast<int32_t>(specs.size());
  const size_t spec_bytes = specs.size() * sizeof(kernels::AcceptSeq);
  const size_t record_bytes = specs.size() * kernels::kAcceptRecordInts * sizeof(int32_t);
  if (specs_.bytes() < spec_bytes || records_.bytes() < record_bytes) {
    // Growing frees buffers a queued kernel may still read.
    check(cudaStreamSynchronize(stream), "stream sync");
    specs_.allocate(std::max(specs_.bytes(), spec_bytes), "device acceptance");
    records_.allocate(std::max(records_.bytes(), record_bytes), "device acceptance");
  }
  specs_host_.reserve(spec_bytes, "device acceptance");
  records_host_.reserve(record_bytes, "device acceptance");
  std::copy(specs.begin(), specs.end(), specs_host_.get<kernels::AcceptSeq>());
  check(
      cudaMemcpyAsync(specs_.get(), specs_host_.get(), spec_bytes, cudaMemcpyHostToDevice, stream),
      "upload of acceptance specs");
  constexpr int32_t cap = kMaxCandidateTopK;
  kernels::AcceptParams p;
  p.seqs = specs_.get<kernels::AcceptSeq>();
  p.n_seqs = n;
  p.draft_tokens = chain.draws;
  p.draft_cands = chain.draws + int64_t{chain.steps} * chain.rows;
  p.chain_rows = chain.rows;
  p.chain_passes = chain.steps;
  p.verify_cands = verify.block;
  p.verify_rows = verify.rows;
  p.cap = cap;
  p.out = records_.get<int32_t>();
  check(kernels::speculative_accept(p, stream), "speculative_accept");
  check(cudaMemcpyAsync(records_host_.get(), p.out, record_bytes, cudaMemcpyDeviceToHost, stream),
        "acceptance download");
  pending_ = n;
}

void DeviceAcceptance::end(std::vector<BackendContext::AcceptedOnDevice> *out) {
  if (pending_ == 0) fail(VEGAS_ERR_INTERNAL, "end_accept without an acceptance begun");
  const int32_t n = pending_;
  pending_ = 0;
  out->resize(static_cast<size_t>(n));
  const int32_t *host = records_host_.get<int32_t>();
  for (int32_t i = 0; i < n; ++i) {
    const int32_t *rec = host + int64_t{i} * kernels::kAcceptRecordInts;
    BackendContext::AcceptedOnDevice &a = (*out)[static_cast<size_t>(i)];
    a.ok = rec[0] == kernels::kAcceptOk && rec[1] >= 0 && rec[1] <= kernels::kMaxAcceptDrafts;
    a.n_accepted = a.ok ? rec[1] : 0;
    a.draws = a.ok ? static_cast<uint64_t>(rec[2]) : 0;
    if (a.ok)
      a.tokens.assign(rec + 3, rec + 3 + rec[1] + 1);
    else
      a.tokens.clear();
  }
}

}  // namespace vegas::cuda
