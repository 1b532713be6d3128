// What both verify kernels (verify_attention.cu, verify_attention_warps.cu)
// write for one piece of a query vector once their warps are combined.
#pragma once

#include "cuda_utils.cuh"
#include "paged_attention.cuh"

namespace vegas::kernels {

#if defined(__CUDACC__)

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
