// CudaContext's device acceptance (BackendContext::begin_accept): the verify
// pass's candidates and the chain's draws and candidates never leave the
// device; one record per sequence comes back with the pass's download.
#include "backend/cuda/cuda_context.h"
#include "common/error.h"
#include "cuda_utils.cuh"
#include "sampling/sampling.h"

namespace vegas::cuda {

bool CudaContext::begin_accept(const std::vector<AcceptOnDevice> &seqs) {
  static const bool enabled = kernels::variant_enabled("VEGAS_CUDA_DEVICE_ACCEPT");
  acceptance_.abandon();
  if (!enabled || !pending_cand_ || seqs.empty() || chain_->n_draws() == 0) return false;
  const int32_t verify_rows = static_cast<int32_t>(pending_cand_->k.size());
  std::vector<kernels::AcceptSeq> specs(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    const AcceptOnDevice &a = seqs[i];
    if (a.params == nullptr || a.params->has_penalties() || a.gamma < 0 ||
        a.gamma > kernels::kMaxAcceptDrafts || a.gamma > chain_->steps() || a.first_row < 0 ||
        a.first_row + a.gamma >= verify_rows ||
        (a.gamma > 0 && (a.chain_row < 0 || a.chain_row >= chain_->rows())))
      return false;
    RowSampling rule;
    rule.params = a.params;
    rule.rng_counter = a.rng_counter;
    fill_sampling_rules(&rule, 1, 0, &specs[i].rule);
    specs[i].first_row = a.first_row;
    specs[i].gamma = a.gamma;
    specs[i].chain_row = a.gamma > 0 ? a.chain_row : 0;
  }
  DeviceAcceptance::Chain chain;
  chain.draws = chain_->all_draws();
  chain.steps = chain_->steps();
  chain.rows = chain_->rows();
  DeviceAcceptance::Candidates verify;
  verify.block = cand_out_.get<int32_t>();
  verify.rows = verify_rows;
  acceptance_.begin(stream_, specs, chain, verify);
  return true;
}

void CudaContext::end_accept(std::vector<AcceptedOnDevice> *out) {
  if (pending_cand_) fail(VEGAS_ERR_INTERNAL, "end_accept before end_candidates");
  acceptance_.end(out);
}

}  // namespace vegas::cuda
