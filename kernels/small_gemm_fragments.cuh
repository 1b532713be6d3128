// Device helpers of the tensor-core few-row GEMMs (small_gemm_mma.cu,
// qkv_rope_mma.cu): each 16 input rows form one m16n8k16 A tile whose
// fragments each warp loads straight into registers for its slice of K, the
// RMSNorm of the rows applied on the way (SmallGemmParams::x_f32).
//
// Slices: warp w owns the CPW 32-input chunks w * CPW .. w * CPW + CPW - 1.
// Within a chunk, lane (g, t) = (lane / 4, lane % 4) holds the 8 consecutive
// inputs 8t .. 8t + 7 of rows g and g + 8; the weight side reads the same 8
// inputs of its column, so the k order inside each mma matches on both sides.
#pragma once

#include "mma_fragments.cuh"
#include "small_gemm.cuh"

namespace vegas::kernels {

#if defined(__CUDACC__)

constexpr int kSmallGemmChunk = 32;  // inputs per lane-group read (4 lanes x 8)

__device__ __forceinline__ uint4 load16_or_zero(const bf16 *p, bool valid) {
  return valid ? *reinterpret_cast<const uint4 *>(p) : make_uint4(0, 0, 0, 0);
}

// First input of chunk c of warp `warp` read by lane quarter t.
template <int CPW>
__device__ __forceinline__ int small_gemm_input(int warp, int c, int t) {
  return (warp * CPW + c) * kSmallGemmChunk + 8 * t;
}

// The RMSNorm weights (with x_f32) do not depend on the previous kernel: they
// are copied into norm_s[k] (shared) before the PDL wait, so that no
// dependent round trip follows it; small_gemm_a_fragments reads them there.
template <int CPW>
__device__ __forceinline__ void small_gemm_stage_norm(const SmallGemmParams &p, int warp, int lane,
                                                      bf16 *norm_s) {
  if (p.x_f32 == nullptr || lane >= 4) return;  // lanes t = 0..3 of row group 0 cover the slice
#pragma unroll
  for (int c = 0; c < CPW; ++c) {
    const int kk = small_gemm_input<CPW>(warp, c, lane);
    if (kk < p.k) mma::cp_async16(norm_s + kk, p.norm_weight + kk, true);
  }
  mma::cp_async_commit();
}

// xa[i][c]: rows g (i = 0) and g + 8 (i = 1) of chunk c, bf16, zero past m
// or k. With x_f32 the rows are RMS-normalised over all k inputs, which needs
// every warp of the block: ss_part is [n_warps][kSmallGemmTileRows] shared scratch, and the
// call contains a __syncthreads (all threads must make it).
template <int CPW>
__device__ __forceinline__ void small_gemm_a_fragments(const SmallGemmParams &p, int warp,
                                                       int n_warps, int lane,
                                                       float (*ss_part)[kSmallGemmTileRows],
                                                       const bf16 *norm_s, uint4 (&xa)[2][CPW]) {
  const int g = lane >> 2, t = lane & 3;
  const int k = p.k;
  const int rows[2] = {g, g + 8};
  if (p.x_f32 == nullptr) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int c = 0; c < CPW; ++c) {
        const int kk = small_gemm_input<CPW>(warp, c, t);
        xa[i][c] = load16_or_zero(p.x_bf16 + static_cast<int64_t>(rows[i]) * k + kk,
                                  rows[i] < p.m && kk < k);
      }
    return;
  }
  float ss[2] = {0.0f, 0.0f};
  float xf[2][CPW][8];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int c = 0; c < CPW; ++c) {
      const int kk = small_gemm_input<CPW>(warp, c, t);
      float4 a = make_float4(0, 0, 0, 0), b = a;
      if (rows[i] < p.m && kk < k) {
        const int64_t xr = p.x_row_index != nullptr ? p.x_row_index[rows[i]] : rows[i];
        const float *src = p.x_f32 + xr * k + kk;
        a = *reinterpret_cast<const float4 *>(src);
        b = *reinterpret_cast<const float4 *>(src + 4);
      }
      const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        xf[i][c][e] = v[e];
        ss[i] += v[e] * v[e];
      }
    }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    ss[i] = mma::quad_sum(ss[i]);
    if (t == 0) ss_part[warp][rows[i]] = ss[i];
  }
  mma::cp_async_wait<0>();  // norm_s (small_gemm_stage_norm)
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float total = 0.0f;
    for (int w = 0; w < n_warps; ++w) total += ss_part[w][rows[i]];
    const float inv = rsqrtf(total / k + p.eps);
#pragma unroll
    for (int c = 0; c < CPW; ++c) {
      const int kk = small_gemm_input<CPW>(warp, c, t);
      const uint4 w8 =
          kk < k ? *reinterpret_cast<const uint4 *>(norm_s + kk) : make_uint4(0, 0, 0, 0);
      const bf16 *w = reinterpret_cast<const bf16 *>(&w8);
      float nv[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) nv[e] = xf[i][c][e] * inv * __bfloat162float(w[e]);
      xa[i][c] = pack8(nv);
    }
  }
}

// The rows of row tile `tile` (kSmallGemmTileRows rows; blockIdx.y of the
// tensor-core kernels, which take up to kSmallGemmMmaMaxRows): the same GEMM
// on rows r0 = kSmallGemmTileRows * tile and the next ones of p, outputs
// included (n columns per output row).
__device__ __forceinline__ SmallGemmParams small_gemm_row_tile(const SmallGemmParams &p, int tile) {
  SmallGemmParams q = p;
  const int r0 = kSmallGemmTileRows * tile;
  const int64_t in_off = static_cast<int64_t>(r0) * p.k, out_off = static_cast<int64_t>(r0) * p.n;
  q.m = min(kSmallGemmTileRows, p.m - r0);
  if (p.x_row_index != nullptr)
    q.x_row_index += r0;  // the index names absolute rows of x_f32
  else if (p.x_f32 != nullptr)
    q.x_f32 += in_off;
  if (p.x_bf16 != nullptr) q.x_bf16 += in_off;
  if (p.y_f32 != nullptr) q.y_f32 += out_off;
  if (p.y_bf16 != nullptr) q.y_bf16 += out_off;
  return q;
}

// acc[j] = this warp's partial tile j (rows g, g + 8; columns 2t, 2t + 1 of
// its 8): the products over its CPW chunks of A (xa) and of the weight
// fragments wf[j][c] (8 inputs 8t .. 8t + 7 of column g, same k order as xa).
template <int CPW, int TILES>
__device__ __forceinline__ void small_gemm_mma_chunks(const uint4 (&xa)[2][CPW],
                                                      const uint4 (&wf)[TILES][CPW],
                                                      float (&acc)[TILES][4]) {
#pragma unroll
  for (int j = 0; j < TILES; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
  for (int c = 0; c < CPW; ++c) {
    const uint32_t a_lo[4] = {xa[0][c].x, xa[1][c].x, xa[0][c].y, xa[1][c].y};
    const uint32_t a_hi[4] = {xa[0][c].z, xa[1][c].z, xa[0][c].w, xa[1][c].w};
#pragma unroll
    for (int j = 0; j < TILES; ++j) {
      mma::mma_bf16(acc[j], a_lo, wf[j][c].x, wf[j][c].y);
      mma::mma_bf16(acc[j], a_hi, wf[j][c].z, wf[j][c].w);
    }
  }
}

#endif  // __CUDACC__

}  // namespace vegas::kernels
