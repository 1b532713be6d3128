// Compact shared-memory stages of fp8 K/V rows (kv_fp8.cuh), for the kernels
// that score K straight from its codes (decode_attention_mma_fp8.cu,
// verify_attention_warps_fp8.cu): a stage of NK keys holds NK K rows, then NK
// V rows, of HD codes each (16-byte chunks swizzled), then the 2 NK rows'
// scales. Row r's chunk c lies at chunk c ^ ((r / 2) % 4): the rows g = 0..7
// of a fragment load (64 bytes apart) then start at distinct bank groups.
#pragma once

#include "kv_fp8.cuh"

namespace vegas::kernels {

#if defined(__CUDACC__)

// The byte offset of chunk c (16 codes) of stage row r.
template <int HD>
__device__ __forceinline__ int chunk_at(int r, int c) {
  static_assert(HD == 64, "four 16-byte chunks a row, swizzled over four row pairs");
  return r * HD + 16 * (c ^ ((r >> 1) & 3));
}

// A 4-byte copy through L1 (cp.async's 16-byte .cg form is the only one
// through L2 alone); zeros where !valid.
__device__ __forceinline__ void cp_async4(void *smem, const void *gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(mma::smem_addr(smem)),
               "l"(gmem), "r"(valid ? 4 : 0));
}

// Piece `piece` (16 codes) of cache row `head` (slot * n_kv_heads + KV head)
// into stage row `row` of a stage of NK keys; the lane of piece `scale_piece`
// also copies the row's scale. ASYNC: by cp.async (the scale through L1:
// every key but the rows written by the previous kernel was written before it
// began, and those come by the other path), else (after the PDL wait) by plain
// loads through L2 only, as kv_fp8.cuh's stage_piece explains. Invalid rows are
// zeros, scale 0.
template <int HD, int NK, bool ASYNC>
__device__ __forceinline__ void stage_fp8_piece(unsigned char *stage, int row, int piece,
                                                const bf16 *cache, const float *scales,
                                                int64_t head, bool valid, int scale_piece) {
  unsigned char *dst = stage + chunk_at<HD>(row, piece);
  const unsigned char *src =
      reinterpret_cast<const unsigned char *>(cache) + head * HD + 16 * piece;
  float *scale = reinterpret_cast<float *>(stage + 2 * NK * HD) + row;
  if constexpr (ASYNC) {
    mma::cp_async16(dst, src, valid);
    if (piece == scale_piece) cp_async4(scale, scales + head, valid);
  } else {
    *reinterpret_cast<uint4 *>(dst) =
        valid ? __ldcg(reinterpret_cast<const uint4 *>(src)) : make_uint4(0, 0, 0, 0);
    if (piece == scale_piece) *scale = valid ? __ldcg(scales + head) : 0.0f;
  }
}

// Stage rows first..first+15 (a 16-key chunk of V) as unscaled f16 codes into
// the tile vt (row stride STRIDE), by the whole warp: lane l expands half
// l / 16 of row l % 16.
template <int HD, int STRIDE>
__device__ __forceinline__ void expand_v_rows(const unsigned char *stage, int first, bf16 *vt,
                                              int lane) {
  const int row = lane % 16, half = lane / 16;
  uint4 *out = reinterpret_cast<uint4 *>(vt + row * STRIDE + half * (HD / 2));
#pragma unroll
  for (int c = 0; c < HD / 32; ++c) {
    const uint4 in =
        *reinterpret_cast<const uint4 *>(stage + chunk_at<HD>(first + row, half * HD / 32 + c));
    out[2 * c] = make_uint4(e4m3_pair_to_f16(in.x & 0xffffu), e4m3_pair_to_f16(in.x >> 16),
                            e4m3_pair_to_f16(in.y & 0xffffu), e4m3_pair_to_f16(in.y >> 16));
    out[2 * c + 1] = make_uint4(e4m3_pair_to_f16(in.z & 0xffffu), e4m3_pair_to_f16(in.z >> 16),
                                e4m3_pair_to_f16(in.w & 0xffffu), e4m3_pair_to_f16(in.w >> 16));
  }
}

#endif  // __CUDACC__

}  // namespace vegas::kernels
