// Device helpers of the tensor-core attention kernels (prefill_attention.cu,
// verify_attention.cu): cp.async copies into shared memory, ldmatrix loads and
// mma.sync m16n8k16 (bf16 in, f32 accumulation) with its fragment helpers,
// and the online-softmax steps they share.
//
// Fragment layouts (PTX ISA, mma.m16n8k16): lane = 4 * g + t. A holds rows g
// and g + 8, columns 2t, 2t+1 (+8); B holds rows 2t, 2t+1 (+8) of column g;
// the accumulator holds rows g (c0, c1) and g + 8 (c2, c3), columns 2t, 2t+1.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_utils.cuh"

namespace vegas::kernels::mma {

__device__ __forceinline__ unsigned smem_addr(const void *p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool valid) {
  const int n = valid ? 16 : 0;  // 0 = fill with zeros: rows past the range stay finite
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(n));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Four 8x8 bf16 matrices; lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16 *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16 *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// d += a (16x16, row-major) * b (16x8, column-major); bf16 inputs, f32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The same with f16 inputs (kernels reading fp8 caches: kv_fp8.cuh).
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);  // lo in the low half
  return *reinterpret_cast<const uint32_t *>(&v);
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // lo in the low half
  return *reinterpret_cast<const uint32_t *>(&v);
}

// Reductions over the four lanes (t = 0..3) that hold one accumulator row.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// O += P V for MT 16-row M tiles of one warp: each tile's NK weights (its
// `s`, as left by softmax_rescale) form A fragments, two n-tiles per 16 keys;
// V's NK rows, read transposed from vb (row stride STRIDE bf16), are B's rows,
// each fragment loaded once for all MT tiles.
template <int MT, int NK, int HD, int STRIDE>
__device__ __forceinline__ void accumulate_pv(const float (*s)[NK / 8][4], float (*o)[HD / 8][4],
                                              const bf16 *vb, int lane) {
#pragma unroll
  for (int kc = 0; kc < NK / 16; ++kc) {
    uint32_t a[MT][4];
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      a[m][0] = pack_bf16(s[m][2 * kc][0], s[m][2 * kc][1]);
      a[m][1] = pack_bf16(s[m][2 * kc][2], s[m][2 * kc][3]);
      a[m][2] = pack_bf16(s[m][2 * kc + 1][0], s[m][2 * kc + 1][1]);
      a[m][3] = pack_bf16(s[m][2 * kc + 1][2], s[m][2 * kc + 1][3]);
    }
#pragma unroll
    for (int d2 = 0; d2 < HD / 16; ++d2) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, vb + (kc * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * STRIDE + d2 * 16 +
                               (lane >> 4) * 8);
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        mma_bf16(o[m][2 * d2], a[m], b[0], b[1]);
        mma_bf16(o[m][2 * d2 + 1], a[m], b[2], b[3]);
      }
    }
  }
}

// 2^x on the special-function unit, results below 2^-126 flushed to zero:
// exp2f adds a range check and a rescale per call for denormal results, which
// a softmax weight that small (relative to the running maximum) does not need.
// 2^-inf = 0.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Multiplies an M tile's output accumulators (this thread: rows lane / 4 and
// lane / 4 + 8) by their rows' factors.
template <int HD>
__device__ __forceinline__ void scale_rows(float (&o)[HD / 8][4], float alpha_lo, float alpha_hi) {
#pragma unroll
  for (int d = 0; d < HD / 8; ++d) {
    o[d][0] *= alpha_lo;
    o[d][1] *= alpha_lo;
    o[d][2] *= alpha_hi;
    o[d][3] *= alpha_hi;
  }
}

// The online-softmax step of one key tile for a warp's 16-row M tile (this
// thread: rows lane / 4 and lane / 4 + 8). `s` holds the tile's scaled
// scores in the log2 domain (-inf = hidden) for NK keys; mx_lo/mx_hi are this
// thread's maxima over them and the running maxima m_lo/m_hi. Rescales the
// running sums and the output accumulators and turns `s` into weights.
template <int NK, int HD>
__device__ __forceinline__ void softmax_rescale(float (&s)[NK / 8][4], float mx_lo, float mx_hi,
                                                float &m_lo, float &m_hi, float &l_lo, float &l_hi,
                                                float (&o)[HD / 8][4]) {
  mx_lo = quad_max(mx_lo);
  mx_hi = quad_max(mx_hi);
  // A row may see no key of the tile (or of its slice): base 0 keeps exp2
  // finite and every weight 0.
  const float base_lo = mx_lo == -INFINITY ? 0.0f : mx_lo;
  const float base_hi = mx_hi == -INFINITY ? 0.0f : mx_hi;
  const float alpha_lo = exp2_ftz(m_lo - base_lo), alpha_hi = exp2_ftz(m_hi - base_hi);
  m_lo = mx_lo;
  m_hi = mx_hi;
  float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
  for (int n = 0; n < NK / 8; ++n) {
    s[n][0] = exp2_ftz(s[n][0] - base_lo);
    s[n][1] = exp2_ftz(s[n][1] - base_lo);
    s[n][2] = exp2_ftz(s[n][2] - base_hi);
    s[n][3] = exp2_ftz(s[n][3] - base_hi);
    sum_lo += s[n][0] + s[n][1];
    sum_hi += s[n][2] + s[n][3];
  }
  l_lo = l_lo * alpha_lo + sum_lo;
  l_hi = l_hi * alpha_hi + sum_hi;
  // Where no row of the warp has a new maximum, every alpha is exp2(0) = 1
  // exactly and the accumulators keep their bits without the multiplications
  // (most of a step's arithmetic once the maxima settle). The whole warp
  // calls this function, as every mma helper here.
  if (!__any_sync(0xffffffffu, alpha_lo != 1.0f || alpha_hi != 1.0f)) return;
  scale_rows<HD>(o, alpha_lo, alpha_hi);
}

// One key tile of flash attention's online softmax for one 16-row M tile:
// softmax_rescale, then O += P V. Used by verify_attention.
template <int NK, int HD, int STRIDE>
__device__ __forceinline__ void online_softmax_pv(float (&s)[NK / 8][4], float mx_lo, float mx_hi,
                                                  float &m_lo, float &m_hi, float &l_lo,
                                                  float &l_hi, float (&o)[HD / 8][4],
                                                  const bf16 *vb, int lane) {
  softmax_rescale<NK, HD>(s, mx_lo, mx_hi, m_lo, m_hi, l_lo, l_hi, o);
  accumulate_pv<1, NK, HD, STRIDE>(&s, &o, vb, lane);
}

}  // namespace vegas::kernels::mma
