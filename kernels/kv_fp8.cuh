// The fp8 KV cache (PagedAttentionParams::k_scale): K and V rows stored as
// e4m3 bytes, one power-of-two scale per (slot, KV head) beside them, the
// value of byte b being e4m3(b) * scale. The scale is the smallest power of two
// that brings the row's largest magnitude to <= 448 (e4m3's largest finite
// value), so no row overflows whatever the model's magnitudes, and a power of
// two makes the expansion to bf16 exact (e4m3's 3 mantissa bits fit in
// bf16's 7): every kernel that expands a row sees the same values, and the CPU
// backend's rounding (runtime/common/kv_fp8.h) reproduces them bit for bit.
//
// The tiled kernels (paged, prefill, the tiled verify kernel) stage fp8 rows
// into the shared-memory rows they already use for bf16 (row stride >=
// head_dim + 8 elements): the head_dim bytes at byte head_dim of the row, a
// group of four scales at byte 2 head_dim (the padding), and one thread then
// expands the row in place to head_dim bf16 (expand_staged_row; the
// tensor-core code after it is the bf16 code). The tensor-core decode and
// verify warps kernels stage them compactly and apply the scales themselves
// (kv_fp8_stage.cuh). Scale arrays are 16-byte aligned with
// a multiple of four entries (whole groups).
#pragma once

#include "cuda_utils.cuh"

#if defined(__CUDACC__)
#include <cuda_fp8.h>

#include "mma_fragments.cuh"
#endif

namespace vegas::kernels {

// Scale exponents are kept within +-kFp8MaxExponent so that 1 / scale is a
// normal float (rows below 448 * 2^-100 quantize to zeros and subnormals).
constexpr int kFp8MaxExponent = 100;

#if defined(__CUDACC__)

// The exponent e of the scale 2^e of a row whose largest magnitude is amax:
// the smallest e with amax <= 448 * 2^e (0 for an all-zero or non-finite row).
__device__ __forceinline__ int kv_fp8_exponent(float amax) {
  if (!(amax > 0.0f) || !isfinite(amax)) return 0;
  int k = 0;
  const float m = frexpf(amax, &k);  // amax = m 2^k, m in [0.5, 1); 448 = 0.875 2^9
  const int e = k - 9 + (m > 0.875f ? 1 : 0);
  return max(-kFp8MaxExponent, min(kFp8MaxExponent, e));
}

__device__ __forceinline__ unsigned char to_e4m3(float x) {
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

// Two e4m3 bytes (low byte first) as an f16 pair, exact (every e4m3 number
// is an f16 number): one hardware conversion.
__device__ __forceinline__ uint32_t e4m3_pair_to_f16(uint32_t two) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two), __NV_E4M3);
  return uint32_t{h.x} | uint32_t{h.y} << 16;
}

// Two e4m3 bytes (low byte first) times `scale` as a bf16 pair.
__device__ __forceinline__ uint32_t expand_pair(uint32_t two, float scale) {
  const uint32_t h = e4m3_pair_to_f16(two);
  const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&h));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  return *reinterpret_cast<const uint32_t *>(&b);
}

// Four e4m3 bytes as two bf16 pairs.
__device__ __forceinline__ void expand_quad(uint32_t four, float scale, uint32_t &lo,
                                            uint32_t &hi) {
  lo = expand_pair(four & 0xffffu, scale);
  hi = expand_pair(four >> 16, scale);
}

// Eight e4m3 bytes as eight bf16.
__device__ __forceinline__ uint4 expand8(uint2 in, float scale) {
  uint4 out;
  expand_quad(in.x, scale, out.x, out.y);
  expand_quad(in.y, scale, out.z, out.w);
  return out;
}

// The unit of P V's weights in kernels that apply V scales to them
// (v_unit, the largest V scale seen so far, and v_inv = 1 / v_unit, 0 before
// any): with `mine` this lane's largest V scale of the step (0 if none), the
// warp's maximum becomes the unit when it is larger, and rescale(factor) is
// called first with old unit / new unit (exact: powers of two) where the
// outputs were kept in the old one. Scales are finite and >= 0, so their bit
// patterns order as they do: one redux.sync.
template <typename Rescale>
__device__ __forceinline__ void raise_v_unit(float mine, float &v_unit, float &v_inv,
                                             Rescale &&rescale) {
  const float v_max = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(mine)));
  if (v_max > v_unit) {
    if (v_unit > 0.0f) rescale(v_unit * (1.0f / v_max));
    v_unit = v_max;
    v_inv = 1.0f / v_max;
  }
}

// The scale of a staged fp8 row: of the four at byte 2 HD, the one the int
// at byte 0 names (stage_piece).
template <int HD>
__device__ __forceinline__ float staged_scale(const unsigned char *row) {
  return reinterpret_cast<const float *>(row + 2 * HD)[*reinterpret_cast<const int *>(row)];
}

// A staged fp8 row (see above) expanded in place by one thread, each 8 codes
// by `expand8_of` into 16 bytes. Chunks go front to back: chunk c's output
// lands on bytes [32 c, 32 c + 32), which hold only source bytes of chunks
// <= c, each read before it is overwritten.
template <int HD, typename Expand8>
__device__ __forceinline__ void expand_staged_row_by(bf16 *row, Expand8 expand8_of) {
  static_assert(HD % 16 == 0, "16-byte fp8 chunks");
  const unsigned char *b = reinterpret_cast<const unsigned char *>(row);
#pragma unroll
  for (int c = 0; c < HD / 16; ++c) {
    const uint4 in = *reinterpret_cast<const uint4 *>(b + HD + 16 * c);
    uint4 *out = reinterpret_cast<uint4 *>(row + 16 * c);
    out[0] = expand8_of(make_uint2(in.x, in.y));
    out[1] = expand8_of(make_uint2(in.z, in.w));
  }
}

// A staged fp8 row expanded in place to HD scaled bf16; the scale is read first.
template <int HD>
__device__ __forceinline__ void expand_staged_row(bf16 *row) {
  const float scale = staged_scale<HD>(reinterpret_cast<const unsigned char *>(row));
  expand_staged_row_by<HD>(row, [scale](uint2 codes) { return expand8(codes, scale); });
}

// Piece `piece` (elements 8 piece .. 8 piece + 7) of a K or V row into the
// shared-memory row `row`, by cp.async; `at` is the piece's element offset in
// the cache, (slot * n_kv_heads + head) * HD + 8 piece. bf16: 16 bytes in
// place. fp8, staged for expand_staged_row: the even pieces copy 16 codes
// each (theirs and the next piece's), and piece 0 the 16-byte group of four
// scales holding the row's (scales are [slot][head]: the row's is number
// (at / HD) % 4 of its group), recording which at byte 0. Every copy is a
// 16-byte cp.async.cg, through L2 only: kernels that read ahead of their PDL
// wait (PagedAttentionParams::read_ahead) would otherwise keep in L1 a line
// that the previous kernel writes afterwards (a page's scales share one).
// Invalid pieces are zeros (scale 0 for fp8).
template <int HD, bool FP8>
__device__ __forceinline__ void stage_piece(bf16 *row, int piece, const bf16 *cache,
                                            const float *scales, int64_t at, bool valid) {
  if constexpr (FP8) {
    unsigned char *b = reinterpret_cast<unsigned char *>(row);
    if (piece % 2 == 0)
      mma::cp_async16(b + HD + 8 * piece, reinterpret_cast<const unsigned char *>(cache) + at,
                      valid);
    if (piece == 0) {
      const int64_t head = at / HD;
      mma::cp_async16(b + 2 * HD, scales + (head & ~int64_t{3}), valid);
      *reinterpret_cast<int *>(b) = static_cast<int>(head & 3);
    }
  } else {
    mma::cp_async16(row + 8 * piece, cache + at, valid);
  }
}

// stage_piece by plain loads (L2 only for fp8, as above) and stores.
template <int HD, bool FP8>
__device__ __forceinline__ void store_piece(bf16 *row, int piece, const bf16 *cache,
                                            const float *scales, int64_t at, bool valid) {
  if constexpr (FP8) {
    unsigned char *b = reinterpret_cast<unsigned char *>(row);
    if (piece % 2 == 0)
      *reinterpret_cast<uint4 *>(b + HD + 8 * piece) =
          valid ? __ldcg(reinterpret_cast<const uint4 *>(
                      reinterpret_cast<const unsigned char *>(cache) + at))
                : make_uint4(0, 0, 0, 0);
    if (piece == 0) {
      const int64_t head = at / HD;
      *reinterpret_cast<float4 *>(b + 2 * HD) =
          valid ? __ldcg(reinterpret_cast<const float4 *>(scales + (head & ~int64_t{3})))
                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      *reinterpret_cast<int *>(b) = static_cast<int>(head & 3);
    }
  } else {
    *reinterpret_cast<uint4 *>(row + 8 * piece) =
        valid ? *reinterpret_cast<const uint4 *>(cache + at) : make_uint4(0, 0, 0, 0);
  }
}

#endif  // __CUDACC__

}  // namespace vegas::kernels
