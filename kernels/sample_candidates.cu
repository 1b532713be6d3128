// sample_candidates (sampling.cuh): lane l of a row's warp holds candidates
// l and l + 32 (ids ascending). The rules follow build_distribution's order:
// temperature weights relative to the maximum, the top-p nucleus (rank:
// descending logit, then ascending id; a candidate is in while the mass
// ranked before it is under top_p of the total), min-p on the weights, then
// sample_from's inverse CDF over ascending ids with the host Rng's draw.
// The weights round the same float expression as the host's; sums of 64 of
// them in double are exact unless they span more than 2^29, so the summation
// order does not move a boundary: the drawn token is in the distribution the
// host builds from the same candidates (the draft chain checks that).
#include "cuda_utils.cuh"
#include "logit_candidates.cuh"
#include "sampling.cuh"
#include "sampling_rng.cuh"

namespace vegas::kernels {

namespace {

constexpr int kWarps = 4;  // rows per block
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFull, v, off);
  return v;
}

__device__ __forceinline__ double warp_inclusive_scan(double v, int lane) {
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const double u = __shfl_up_sync(kFull, v, off);
    if (lane >= off) v += u;
  }
  return v;
}

// The first candidate set in two ballots, over candidates lane (lo) and
// lane + 32 (hi); -1 if none is.
__device__ __forceinline__ int first_of(unsigned lo, unsigned hi) {
  return lo ? __ffs(lo) - 1 : (hi ? 32 + __ffs(hi) - 1 : -1);
}

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
  const int32_t *ids = p.ids + static_cast<int64_t>(row) * p.cap;
  const float *values = p.values + static_cast<int64_t>(row) * p.cap;
  bool have[2];
  float l[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    have[e] = lane + 32 * e < n;
    l[e] = have[e] ? values[lane + 32 * e] : -INFINITY;
  }
  float mx = fmaxf(l[0], l[1]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, off));

  if (!(rule.temperature > 0.0f)) {  // greedy: the lowest id of the maximum
    const int j = first_of(__ballot_sync(kFull, have[0] && l[0] == mx),
                           __ballot_sync(kFull, have[1] && l[1] == mx));
    if (lane == 0) *out = ids[j];
    return;
  }
  float w[2];
#pragma unroll
  for (int e = 0; e < 2; ++e)  // exp in double, rounded once: the host's float exp to ~1e-3 ulp
    w[e] = have[e] ? static_cast<float>(exp(static_cast<double>((l[e] - mx) / rule.temperature)))
                   : 0.0f;
  const double total = warp_sum(static_cast<double>(w[0]) + static_cast<double>(w[1]));

  bool keep[2] = {have[0], have[1]};
  if (rule.top_p < 1.0f) {
    const double target = static_cast<double>(rule.top_p) * total;
    double before[2] = {0.0, 0.0};  // mass ranked before each of this lane's candidates
    for (int i = 0; i < n; ++i) {   // n is the same for the whole warp
      const float li = __shfl_sync(kFull, i < 32 ? l[0] : l[1], i & 31);
      const float wi = __shfl_sync(kFull, i < 32 ? w[0] : w[1], i & 31);
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = lane + 32 * e;
        if (li > l[e] || (li == l[e] && i < j)) before[e] += wi;
      }
    }
#pragma unroll
    for (int e = 0; e < 2; ++e) keep[e] = keep[e] && before[e] < target;
  }
#pragma unroll
  for (int e = 0; e < 2; ++e) keep[e] = keep[e] && w[e] > 0.0f && w[e] >= rule.min_p;

  // Renormalised as the host's float probabilities, then its inverse CDF.
  const double kept_total =
      warp_sum((keep[0] ? static_cast<double>(w[0]) : 0.0) + (keep[1] ? w[1] : 0.0));
  const float scale = static_cast<float>(1.0 / kept_total);
  float prob[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) prob[e] = keep[e] ? w[e] * scale : 0.0f;
  const double prob_total = warp_sum(static_cast<double>(prob[0]) + static_cast<double>(prob[1]));
  const double target = uniform(rule.seed, rule.counter) * prob_total;
  const double cum0 = warp_inclusive_scan(prob[0], lane);
  const double cum1 = __shfl_sync(kFull, cum0, 31) + warp_inclusive_scan(prob[1], lane);
  int j = first_of(__ballot_sync(kFull, prob[0] > 0.0f && target < cum0),
                   __ballot_sync(kFull, prob[1] > 0.0f && target < cum1));
  if (j < 0) {  // u * total rounded up to the last boundary: the last positive one
    const unsigned lo = __ballot_sync(kFull, prob[0] > 0.0f),
                   hi = __ballot_sync(kFull, prob[1] > 0.0f);
    j = hi ? 32 + 31 - __clz(hi) : (lo ? 31 - __clz(lo) : -1);
  }
  if (lane == 0) *out = j >= 0 ? ids[j] : kSampleBadRow;
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
