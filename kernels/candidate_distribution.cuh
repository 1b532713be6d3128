// A sampling distribution over one row's logit candidates (logit_candidates.cuh),
// held by one warp: lane l holds candidates l and l + 32 (ids ascending). The
// rules follow build_distribution's order: temperature weights relative to the
// maximum, the top-p nucleus (rank: descending logit, then ascending id; a
// candidate is in while the mass ranked before it is under top_p of the
// total), min-p on the weights, renormalised as the host's float
// probabilities. The weights round the same float expression as the host's;
// sums of 64 of them in double are exact unless they span more than 2^29, so
// the summation order does not move a boundary. sample_candidates draws from
// it, speculative_accept tests drafts against two of them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "sampling.cuh"

namespace vegas::kernels {

constexpr unsigned kFullWarp = 0xffffffffu;

__device__ __forceinline__ double warp_sum_double(double v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullWarp, v, off);
  return v;
}

__device__ __forceinline__ double warp_inclusive_scan_double(double v, int lane) {
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const double u = __shfl_up_sync(kFullWarp, v, off);
    if (lane >= off) v += u;
  }
  return v;
}

// The first candidate set in two ballots, over candidates lane (lo) and
// lane + 32 (hi); -1 if none is.
__device__ __forceinline__ int first_of_ballots(unsigned lo, unsigned hi) {
  return lo ? __ffs(lo) - 1 : (hi ? 32 + __ffs(hi) - 1 : -1);
}

// This lane's two entries: id -1 and probability 0 where there is no candidate.
struct WarpDistribution {
  int32_t id[2];
  float prob[2];
};

// The distribution of a row of n (1..64) candidates under `rule` (greedy: the
// lowest id of the largest logit, probability 1). The caller has checked n.
__device__ __forceinline__ WarpDistribution candidate_distribution(const SamplingRow &rule, int n,
                                                                   const int32_t *ids,
                                                                   const float *values, int lane) {
  WarpDistribution d;
  bool have[2];
  float l[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    have[e] = lane + 32 * e < n;
    l[e] = have[e] ? values[lane + 32 * e] : -INFINITY;
    d.id[e] = have[e] ? ids[lane + 32 * e] : -1;
    d.prob[e] = 0.0f;
  }
  float mx = fmaxf(l[0], l[1]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFullWarp, mx, off));

  if (!(rule.temperature > 0.0f)) {  // greedy: the lowest id of the maximum
    const int j = first_of_ballots(__ballot_sync(kFullWarp, have[0] && l[0] == mx),
                                   __ballot_sync(kFullWarp, have[1] && l[1] == mx));
    if ((j & 31) == lane) d.prob[j >> 5] = 1.0f;
    return d;
  }
  float w[2];
#pragma unroll
  for (int e = 0; e < 2; ++e)  // exp in double, rounded once: the host's float exp to ~1e-3 ulp
    w[e] = have[e] ? static_cast<float>(exp(static_cast<double>((l[e] - mx) / rule.temperature)))
                   : 0.0f;
  const double total = warp_sum_double(static_cast<double>(w[0]) + static_cast<double>(w[1]));

  bool keep[2] = {have[0], have[1]};
  if (rule.top_p < 1.0f) {
    const double target = static_cast<double>(rule.top_p) * total;
    double before[2] = {0.0, 0.0};  // mass ranked before each of this lane's candidates
    for (int i = 0; i < n; ++i) {   // n is the same for the whole warp
      const float li = __shfl_sync(kFullWarp, i < 32 ? l[0] : l[1], i & 31);
      const float wi = __shfl_sync(kFullWarp, i < 32 ? w[0] : w[1], i & 31);
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

  const double kept_total =
      warp_sum_double((keep[0] ? static_cast<double>(w[0]) : 0.0) + (keep[1] ? w[1] : 0.0));
  const float scale = static_cast<float>(1.0 / kept_total);
#pragma unroll
  for (int e = 0; e < 2; ++e) d.prob[e] = keep[e] ? w[e] * scale : 0.0f;
  return d;
}

// sample_from (sampling.h) over d with the uniform u: the host's inverse CDF
// over ascending ids; -1 when no probability is positive.
__device__ __forceinline__ int32_t warp_sample_from(const WarpDistribution &d, double u, int lane) {
  const double total =
      warp_sum_double(static_cast<double>(d.prob[0]) + static_cast<double>(d.prob[1]));
  const double target = u * total;
  const double cum0 = warp_inclusive_scan_double(d.prob[0], lane);
  const double cum1 =
      __shfl_sync(kFullWarp, cum0, 31) + warp_inclusive_scan_double(d.prob[1], lane);
  int j = first_of_ballots(__ballot_sync(kFullWarp, d.prob[0] > 0.0f && target < cum0),
                           __ballot_sync(kFullWarp, d.prob[1] > 0.0f && target < cum1));
  if (j < 0) {  // u * total rounded up to the last boundary: the last positive one
    const unsigned lo = __ballot_sync(kFullWarp, d.prob[0] > 0.0f),
                   hi = __ballot_sync(kFullWarp, d.prob[1] > 0.0f);
    j = hi ? 32 + 31 - __clz(hi) : (lo ? 31 - __clz(lo) : -1);
  }
  if (j < 0) return -1;
  return __shfl_sync(kFullWarp, d.id[j >> 5], j & 31);
}

// The probability of token x under d (0 when x is not in it), on every lane.
__device__ __forceinline__ float warp_prob_of(const WarpDistribution &d, int32_t x) {
  // At most one entry of the warp matches: the others add exact zeros.
  float v = (d.id[0] == x ? d.prob[0] : 0.0f) + (d.id[1] == x ? d.prob[1] : 0.0f);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullWarp, v, off);
  return v;
}

}  // namespace vegas::kernels
