// What the tensor-core decode kernels (decode_attention_mma.cu for bf16
// caches, decode_attention_mma_fp8.cu for fp8 ones) share: kMmaWarps warps a
// block, the GQA group's query heads as rows 0..GROUP-1 of one m16 tile, and
// the block's end, where every warp leaves its online-softmax state in shared
// memory and decode_finish (or its cluster form) combines the warps and the
// splits.
#pragma once

#include "decode_common.cuh"
#include "mma_fragments.cuh"

namespace vegas::kernels {

constexpr int kMmaWarps = 8;

#if defined(__CUDACC__)

// The warps' states after the key loop, in the space of their stages.
template <int HD, int GROUP>
struct MmaWarpStates {
  float m[kMmaWarps][GROUP], l[kMmaWarps][GROUP];
  float acc[kMmaWarps][GROUP][HD];
};

// The block's end, by all its threads once every cp.async group is done:
// each warp's state per query head (its rows lane / 4 < GROUP; m and l as its
// online softmax left them, l not yet summed over the quad) into `smem`,
// which the caller's stages no longer use, then the warps and splits combined.
// `mark(k)` stamps the timeline (kernels/timeline.cuh) at the end's stages.
template <int HD, int GROUP, bool CLUSTER, typename Mark>
__device__ __forceinline__ void finish_mma_warps(const PagedAttentionParams &p, int row, int kvh,
                                                 const float (&o)[HD / 8][4], float m, float l,
                                                 unsigned char *smem, Mark mark) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t4 = lane & 3;
  l = mma::quad_sum(l);
  __syncthreads();
  auto *red = reinterpret_cast<MmaWarpStates<HD, GROUP> *>(smem);
  if (g < GROUP) {
#pragma unroll
    for (int d = 0; d < HD / 8; ++d) {
      red->acc[warp][g][d * 8 + 2 * t4] = o[d][0];
      red->acc[warp][g][d * 8 + 2 * t4 + 1] = o[d][1];
    }
    if (t4 == 0) {
      red->m[warp][g] = m;
      red->l[warp][g] = l;
    }
  }
  __syncthreads();
  mark(8);
  if constexpr (CLUSTER)
    decode_finish_cluster<HD, GROUP, kMmaWarps>(p, row, kvh, red->m, red->l, red->acc, mark);
  else
    decode_finish<HD, GROUP, kMmaWarps>(p, row, kvh, red->m, red->l, red->acc);
}

#endif  // __CUDACC__

}  // namespace vegas::kernels
