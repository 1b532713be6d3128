// sample_candidates (sampling.cuh): one warp a row draws from the row's
// candidate_distribution (candidate_distribution.cuh) with sample_from's
// inverse CDF and the host Rng's draw, so the drawn token is in the
// distribution the host builds from the same candidates (the draft chain
// checks that).
#include "candidate_distribution.cuh"
#include "cuda_utils.cuh"
#include "logit_candidates.cuh"
#include "sampling.cuh"
#include "sampling_rng.cuh"

namespace vegas::kernels {

namespace {

constexpr int kWarps = 4;  // rows per block

__global__ void __launch_bounds__(kWarps * 32) sample_candidates_kernel(CandidateSampleParams p) {
  pdl_enter();
  const int row = blockIdx.x * kWarps + static_cast<int>(threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= p.rows) return;
  const int n = p.count[row];
  int32_t *out = p.out + row;
  if (n == kCandidatesOverflow || n <= 0 || n > p.cap) {
    if (lane == 0) *out = n == kCandidatesOverflow ? 0 : kSampleBadRow;
    return;
  }
  const SamplingRow rule = p.rules[row];
  const WarpDistribution d =
      candidate_distribution(rule, n, p.ids + static_cast<int64_t>(row) * p.cap,
                             p.values + static_cast<int64_t>(row) * p.cap, lane);
  // Greedy rows draw nothing random: their one entry has probability 1.
  const double u = rule.temperature > 0.0f ? uniform(rule.seed, rule.counter) : 0.0;
  const int32_t token = warp_sample_from(d, u, lane);
  if (lane == 0) *out = token >= 0 ? token : kSampleBadRow;
}

}  // namespace

cudaError_t sample_candidates(const CandidateSampleParams &p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.rows < 0 || p.cap < 1 || p.cap > 64 || p.count == nullptr || p.ids == nullptr ||
      p.values == nullptr || p.rules == nullptr || p.out == nullptr)
    return cudaErrorInvalidValue;
  return launch_kernel(sample_candidates_kernel, (p.rows + kWarps - 1) / kWarps, kWarps * 32, 0,
                       stream, p);
}

}  // namespace vegas::kernels
