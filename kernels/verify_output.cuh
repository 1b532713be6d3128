// What both verify kernels (verify_attention.cu, verify_attention_warps.cu)
// do after their key loop: each warp leaves its online-softmax state in shared
// memory, the warps' key slices of each query vector are combined, and one
// piece of the vector is written.
#pragma once

#include "cuda_utils.cuh"
#include "paged_attention.cuh"

namespace vegas::kernels {

#if defined(__CUDACC__)

// One warp's state of a 16-vector M tile (this thread: vectors base + lane / 4
// and base + lane / 4 + 8; l_lo, l_hi summed over the quad already) into
// o_s[vector * OSTRIDE + dim], m_s[vector] and l_s[vector].
template <int HD, int OSTRIDE>
__device__ __forceinline__ void store_tile_state(const float (&o)[HD / 8][4], float m_lo,
                                                 float m_hi, float l_lo, float l_hi, int base,
                                                 float *o_s, float *m_s, float *l_s) {
  const int g = (threadIdx.x & 31) >> 2, t4 = threadIdx.x & 3;
  float *lo = o_s + (base + g) * OSTRIDE + 2 * t4, *hi = lo + 8 * OSTRIDE;
#pragma unroll
  for (int d = 0; d < HD / 8; ++d) {
    *reinterpret_cast<float2 *>(lo + d * 8) = make_float2(o[d][0], o[d][1]);
    *reinterpret_cast<float2 *>(hi + d * 8) = make_float2(o[d][2], o[d][3]);
  }
  if (t4 == 0) {
    m_s[base + g] = m_lo;
    m_s[base + g + 8] = m_hi;
    l_s[base + g] = l_lo;
    l_s[base + g + 8] = l_hi;
  }
}

// The SLICES key slices of one vector (stored at index slice_at(sl) by
// store_tile_state) combined for piece c: acc unnormalised, m the largest
// maximum, l the sum, each slice weighted by 2^(m_slice - m).
template <int SLICES, int OSTRIDE, typename SliceAt>
__device__ __forceinline__ void combine_slices(const float *o_s, const float *m_s, const float *l_s,
                                               SliceAt slice_at, int c, float (&acc)[8], float &m,
                                               float &l) {
  m = -INFINITY;
  l = 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) acc[e] = 0.0f;
#pragma unroll
  for (int sl = 0; sl < SLICES; ++sl) m = fmaxf(m, m_s[slice_at(sl)]);
  if (m == -INFINITY) return;
#pragma unroll
  for (int sl = 0; sl < SLICES; ++sl) {
    const int at = slice_at(sl);
    const float mw = m_s[at];
    if (mw == -INFINITY) continue;
    const float wt = exp2f(mw - m);
    l += wt * l_s[at];
    const float *src = o_s + at * OSTRIDE + c * 8;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] += wt * src[e];
  }
}

// Piece c (dimensions 8c .. 8c + 7) of query head h of `row`: acc holds the
// unnormalised output, l its sum of weights and m their maximum (log2
// domain; l == 0 when the block's keys were none of the vector's). With one
// split, the output and (c == 0, captured row) the natural-log LSE; else this
// split's normalised partial result and its log2 LSE, for a merge.
template <int HD>
__device__ __forceinline__ void write_verify_piece(const PagedAttentionParams &p, int64_t row,
                                                   int h, int c, float (&acc)[8], float m,
                                                   float l) {
  constexpr float kLn2 = 0.6931471805599453f;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) acc[e] *= inv;
  const float lse = l > 0.0f ? m + log2f(l) : -INFINITY;
  if (p.n_splits == 1) {
    *reinterpret_cast<uint4 *>(p.out + (row * p.n_heads + h) * HD + c * 8) = pack8(acc);
    if (c == 0 && p.cap_logits != nullptr) {
      const int slot = p.row_cap_slot[row];
      if (slot >= 0)
        p.cap_lse[static_cast<int64_t>(slot) * p.n_heads + h] = lse * kLn2;  // -inf stays
    }
  } else {
    const int64_t idx = static_cast<int64_t>(blockIdx.z) * p.total_rows + row;
    float *po = p.partial_out + (idx * p.n_heads + h) * HD + c * 8;
    *reinterpret_cast<float4 *>(po) = make_float4(acc[0], acc[1], acc[2], acc[3]);
    *reinterpret_cast<float4 *>(po + 4) = make_float4(acc[4], acc[5], acc[6], acc[7]);
    if (c == 0) p.partial_lse[idx * p.n_heads + h] = lse;
  }
}

#endif  // __CUDACC__

}  // namespace vegas::kernels
