// quant_gemv_f8_mma (quant_gemv.cuh): F8 matrices times 1-8 bf16 rows on the
// tensor cores.
//
// The CUDA-core kernel (quant_gemv.cu) widens each code and each input value
// to f32 and spends one FMA a value per input row: its instructions grow with
// the input rows, and its largest matrices are bound by the issue rate. Here
// more input rows cost (almost) nothing: a block owns 16 output rows (one m16
// tile) and S warps each take a slice of k. A lane reads 16 codes of rows g and
// g + 8 (g = lane / 4) at k offset 16 t (t = lane % 4) of a 64-value step;
// each code becomes a bf16 (exact: every e4m3 value is one) and four
// m16n8k16 MMAs take them as A, with the input rows as B: column g of B is
// input row g, read as it is (bf16 pairs), so nothing on the input side is
// converted. A sum over k does not care how k is ordered inside a step, as
// long as A and B agree: mma j takes the lane's values 4j .. 4j + 3 as its
// k pairs (2t, 2t + 1) and (2t + 8, 2t + 9). Each 128-value group's sums are
// scaled by the group's scale, and the S warps' sums are added in warp order
// through shared memory.
//
// A row's sum is the same bits whatever the number of input rows (1-8): the
// columns of an MMA do not mix, and the order of every addition is fixed.
// With the SwiGLU epilogue a block's 16 rows are 8 rows of the gate and the
// same 8 of up, so that the block writes their silu(gate) * up.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "mma_fragments.cuh"
#include "quant_gemv.cuh"
#include "quant_lanes.cuh"

namespace vegas::kernels {

namespace {

using mma::mma_bf16;
using mma::pack_bf16;

constexpr int kTileRows = 16;  // output rows a block
constexpr int kStep = 64;      // k values a warp step (16 a lane)

// Two e4m3 codes (the low 16 bits) as a bf16 pair, exactly.
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint32_t codes) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes & 0xffffu), __NV_E4M3);
  const float2 f = __half22float2(__half2(h));
  return pack_bf16(f.x, f.y);
}

// One step's 4 MMAs: codes lo (row g) and hi (row g + 8), input pairs x.
__device__ __forceinline__ void mma_step(const uint4 &lo, const uint4 &hi, const uint4 &xa,
                                         const uint4 &xb, float (&sum)[4]) {
  const uint32_t l[4] = {lo.x, lo.y, lo.z, lo.w}, h[4] = {hi.x, hi.y, hi.z, hi.w};
  const uint32_t x[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t a[4] = {e4m3x2_to_bf16x2(l[j]), e4m3x2_to_bf16x2(h[j]),
                           e4m3x2_to_bf16x2(l[j] >> 16), e4m3x2_to_bf16x2(h[j] >> 16)};
    mma_bf16(sum, a, x[2 * j], x[2 * j + 1]);
  }
}

// One scale group of a lane (two steps): codes of rows g and g + 8, their
// scales, and the input pairs.
struct Group {
  uint4 lo[2], hi[2];
  float scale_lo, scale_hi;
};

// The outputs of a tile (quant_gemv_f8_mma_kernel's end): output i = (row r,
// input row m) adds its warps' sums in warp order.
template <int S>
__device__ __forceinline__ void store_tile(const QuantGemvParams &p, const float4 (&partial)[S][32],
                                           int row0) {
  const int n = p.w.n;
  for (int i = threadIdx.x; i < kTileRows * 8; i += S * 32) {
    const int r = i >> 3, m = i & 7;
    if (m >= p.m || row0 + r >= n) continue;
    const int src = (r & 7) * 4 + (m >> 1), part = (r >> 3) * 2 + (m & 1);
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < S; ++w) v += reinterpret_cast<const float *>(&partial[w][src])[part];
    quant_lanes::store_output(p, static_cast<int64_t>(m) * quant_lanes::output_stride(p) + row0 + r,
                              v);
  }
}

// The SwiGLU outputs of a tile (8 rows of the gate, then the same rows of
// up; quant_gemv_f8_mma_kernel's end): output i = (row j, input row m) adds
// its warps' sums of gate row j and up row j in warp order, as store_tile
// adds those of each row.
template <int S>
__device__ __forceinline__ void store_swiglu_tile(const QuantGemvParams &p,
                                                  const float4 (&partial)[S][32], int row0) {
  for (int i = threadIdx.x; i < kTileRows / 2 * 8; i += S * 32) {
    const int j = i >> 3, m = i & 7;
    if (m >= p.m || row0 + j >= p.w.n) continue;
    const int src = j * 4 + (m >> 1);
    float gate = 0.0f, up = 0.0f;
#pragma unroll
    for (int w = 0; w < S; ++w) {
      const float *part = reinterpret_cast<const float *>(&partial[w][src]);
      gate += part[m & 1];
      up += part[2 + (m & 1)];
    }
    quant_lanes::store_swiglu(p, static_cast<int64_t>(m) * quant_lanes::output_stride(p) + row0 + j,
                              gate, up);
  }
}

// kSwiglu (QuantGemvParams::swiglu_up): the tile's rows 0-7 are 8 rows of
// the gate, rows 8-15 the same rows of up.
template <int S, bool kSwiglu>
__global__ void __launch_bounds__(S * 32) quant_gemv_f8_mma_kernel(QuantGemvParams p) {
  __shared__ float4 partial[S][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int k = p.w.k, n = p.w.n, row0 = blockIdx.x * (kSwiglu ? kTileRows / 2 : kTileRows);
  // Rows past the end read row n - 1 again and store nothing.
  const int64_t r_lo = min(row0 + g, n - 1), r_hi = kSwiglu ? r_lo : min(row0 + g + 8, n - 1);
  const QuantMatrix &hi = kSwiglu ? p.swiglu_up : p.w;
  const int slice = k / S, k0 = warp * slice, groups = slice / kF8Group;
  const uint8_t *w_lo = p.w.qs + r_lo * k + k0 + 16 * t;
  const uint8_t *w_hi = hi.qs + r_hi * k + k0 + 16 * t;
  const float *s_lo = p.w.scales_f32 + r_lo * (k / kF8Group) + k0 / kF8Group;
  const float *s_hi = hi.scales_f32 + r_hi * (k / kF8Group) + k0 / kF8Group;
  const bool has_x = g < p.m;  // column g of B: input row g, or zeros
  const bf16 *x = p.x + static_cast<int64_t>(has_x ? g : 0) * k + k0 + 16 * t;
  auto load = [&](int group, Group &c) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int at = group * kF8Group + s * kStep;
      c.lo[s] = __ldg(reinterpret_cast<const uint4 *>(w_lo + at));
      c.hi[s] = __ldg(reinterpret_cast<const uint4 *>(w_hi + at));
    }
    c.scale_lo = __ldg(s_lo + group);
    c.scale_hi = __ldg(s_hi + group);
  };
  // The weights do not depend on the previous kernel: the first group's are
  // requested before the PDL wait.
  Group cur;
  load(0, cur);
  pdl_enter();
  float acc[4] = {};
  for (int group = 0; group < groups; ++group) {
    Group next;
    if (group + 1 < groups) load(group + 1, next);
    float sum[4] = {};
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      uint4 xa = make_uint4(0, 0, 0, 0), xb = xa;
      if (has_x) {
        const uint4 *xs = reinterpret_cast<const uint4 *>(x + group * kF8Group + s * kStep);
        xa = __ldg(xs);
        xb = __ldg(xs + 1);
      }
      mma_step(cur.lo[s], cur.hi[s], xa, xb, sum);
    }
    // sum: rows g (0, 1) and g + 8 (2, 3), columns 2t and 2t + 1.
    acc[0] = fmaf(sum[0], cur.scale_lo, acc[0]);
    acc[1] = fmaf(sum[1], cur.scale_lo, acc[1]);
    acc[2] = fmaf(sum[2], cur.scale_hi, acc[2]);
    acc[3] = fmaf(sum[3], cur.scale_hi, acc[3]);
    cur = next;
  }
  partial[warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  __syncthreads();
  if constexpr (kSwiglu)
    store_swiglu_tile<S>(p, partial, row0);
  else
    store_tile<S>(p, partial, row0);
}

}  // namespace

cudaError_t quant_gemv_f8_mma(const QuantGemvParams &p, int split, cudaStream_t stream) {
  // Each warp's slice whole scale groups: 4 warps always fit, k being a
  // multiple of quant_gemv_k_align's 512 (quant_gemv checked it).
  while (split > 4 && p.w.k % (split * kF8Group) != 0) split /= 2;
  const bool swiglu = p.swiglu_up.qs != nullptr;
  const int tile = swiglu ? kTileRows / 2 : kTileRows;
  const dim3 grid((p.w.n + tile - 1) / tile);
  auto launch = [&](auto plain, auto fused, int warps) {
    return launch_kernel(swiglu ? fused : plain, grid, dim3(warps * 32), 0, stream, p);
  };
  switch (split) {
    case 16:
      return launch(quant_gemv_f8_mma_kernel<16, false>, quant_gemv_f8_mma_kernel<16, true>, 16);
    case 8:
      return launch(quant_gemv_f8_mma_kernel<8, false>, quant_gemv_f8_mma_kernel<8, true>, 8);
    default:
      return launch(quant_gemv_f8_mma_kernel<4, false>, quant_gemv_f8_mma_kernel<4, true>, 4);
  }
}

}  // namespace vegas::kernels
