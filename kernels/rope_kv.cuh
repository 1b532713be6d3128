// The attention input stage, fused: from the qkv GEMM output, per row and head
// add the projection bias (Qwen2), RMS-normalise each q and k head (Qwen3),
// rotate q and k (RoPE, HF rotate_half convention over the first rot_dim
// dimensions, cos/sin multiplied by the attention scaling), write q for the
// attention kernel and k, v into their KV-cache slot.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_utils.cuh"
#include "kv_fp8.cuh"

namespace vegas::kernels {

struct RopeKvParams {
  const bf16 *qkv = nullptr;     // [rows][(n_heads + 2 * n_kv_heads) * head_dim]: q | k | v
  const bf16 *bias = nullptr;    // same width as a qkv row, or null
  const bf16 *q_norm = nullptr;  // [head_dim] or null (no q/k norm)
  const bf16 *k_norm = nullptr;  // [head_dim] or null
  float norm_eps = 1e-6f;
  const int32_t *positions = nullptr;  // [rows]
  const int32_t *slots = nullptr;      // [rows] KV slot (page * page_size + offset); < 0 = skip
  const float *inv_freq = nullptr;     // [rot_dim / 2]
  int32_t rot_dim = 0;                 // rotated dimensions (even, <= head_dim)
  float attention_scaling = 1.0f;      // multiplies cos and sin (YaRN mscale)
  bf16 *q_out = nullptr;               // [rows][n_heads][head_dim]
  bf16 *k_cache = nullptr;             // [slots][n_kv_heads][head_dim] (one layer)
  bf16 *v_cache = nullptr;
  // fp8 caches (kv_fp8.cuh), null = bf16: k and v heads are written as e4m3
  // bytes at the same element offsets, with their scales here, [slots][n_kv_heads].
  float *k_scale = nullptr;
  float *v_scale = nullptr;
  int32_t rows = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;  // <= 256
};

cudaError_t rope_kv(const RopeKvParams &p, cudaStream_t stream);

#if defined(__CUDACC__)
constexpr int kRopeMaxHeadDim = 256;

// A head's values (lane + 32 j holds element j) to base + off: bf16, or with
// `scales` (fp8 caches) e4m3 bytes at byte offset `off` and the head's scale
// at scales[off / head_dim].
__device__ __forceinline__ void store_head(const float (&out)[kRopeMaxHeadDim / 32], int hd,
                                           bf16 *base, float *scales, int64_t off, int lane) {
  if (scales == nullptr) {
#pragma unroll
    for (int j = 0; j < kRopeMaxHeadDim / 32; ++j) {
      const int i = lane + 32 * j;
      if (i >= hd) break;
      base[off + i] = __float2bfloat16(out[j]);
    }
    return;
  }
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kRopeMaxHeadDim / 32; ++j)
    if (lane + 32 * j < hd) amax = fmaxf(amax, fabsf(out[j]));
  const int e = kv_fp8_exponent(warp_max(amax));
  const float inv = ldexpf(1.0f, -e);
  unsigned char *bytes = reinterpret_cast<unsigned char *>(base) + off;
#pragma unroll
  for (int j = 0; j < kRopeMaxHeadDim / 32; ++j) {
    const int i = lane + 32 * j;
    if (i >= hd) break;
    bytes[i] = to_e4m3(out[j] * inv);
  }
  if (lane == 0) scales[off / hd] = ldexpf(1.0f, e);
}

// One (row, head) of the stage, by one warp, given its inputs: `slot` (k and
// v heads: the cache slot, < 0 = padding row, nothing written), cos_sin(f, c,
// s) (frequency f's cos and sin at the row's position, multiplied by the
// attention scaling) and norm_at(i) (the q or k norm weight, read when
// has_norm). head h counts q heads, then k, then v. x holds the head's
// head_dim values (bias added) in shared memory; q heads are written to
// q_out, k and v heads to their cache slot.
template <class CosSin, class NormAt>
__device__ __forceinline__ void rope_kv_head_with(const RopeKvParams &p, int row, int h,
                                                  const float *x, int lane, int slot, bool has_norm,
                                                  CosSin cos_sin, NormAt norm_at) {
  const int hd = p.head_dim;
  const bool is_q = h < p.n_heads, is_v = h >= p.n_heads + p.n_kv_heads;
  bf16 *base = p.q_out;
  float *scales = nullptr;
  int64_t off = 0;
  if (is_q) {
    off = (static_cast<int64_t>(row) * p.n_heads + h) * hd;
  } else {
    if (slot < 0) return;  // padding row: no cache write
    const int kvh = is_v ? h - p.n_heads - p.n_kv_heads : h - p.n_heads;
    base = is_v ? p.v_cache : p.k_cache;
    scales = is_v ? p.v_scale : p.k_scale;
    off = (static_cast<int64_t>(slot) * p.n_kv_heads + kvh) * hd;
  }
  if (is_v) {
    float out[kRopeMaxHeadDim / 32];
#pragma unroll
    for (int j = 0; j < kRopeMaxHeadDim / 32; ++j)
      out[j] = lane + 32 * j < hd ? x[lane + 32 * j] : 0.0f;
    store_head(out, hd, base, scales, off, lane);
    return;
  }
  float scale = 1.0f;
  if (has_norm) {
    float ss = 0.0f;
    for (int i = lane; i < hd; i += 32) ss += x[i] * x[i];
    ss = warp_sum(ss);
    scale = rsqrtf(ss / hd + p.norm_eps);
  }
  float out[kRopeMaxHeadDim / 32];
  const int half = p.rot_dim / 2;
#pragma unroll
  for (int j = 0; j < kRopeMaxHeadDim / 32; ++j) {
    const int i = lane + 32 * j;
    if (i >= hd) break;
    float xi = x[i] * scale;
    if (has_norm) xi *= norm_at(i);
    if (i < p.rot_dim) {
      const int pair = i < half ? i + half : i - half;
      float xp = x[pair] * scale;
      if (has_norm) xp *= norm_at(pair);
      float s, c;
      cos_sin(i < half ? i : i - half, c, s);
      xi = i < half ? xi * c - xp * s : xi * c + xp * s;
    }
    out[j] = xi;
  }
  store_head(out, hd, base, scales, off, lane);
}

// Frequency f's cos and sin at `position`, times the attention scaling: the
// one formula of both callers of rope_kv_head_with.
__device__ __forceinline__ void rope_cos_sin(const RopeKvParams &p, int32_t position, int f,
                                             float &c, float &s) {
  sincosf(static_cast<float>(position) * p.inv_freq[f], &s, &c);
  c *= p.attention_scaling;
  s *= p.attention_scaling;
}

// rope_kv_head_with, its inputs read from global memory (rope_kv).
__device__ __forceinline__ void rope_kv_head(const RopeKvParams &p, int row, int h, float *x,
                                             int lane) {
  const bool is_q = h < p.n_heads;
  const int slot = !is_q && p.slots ? p.slots[row] : -1;
  const bf16 *norm = is_q ? p.q_norm : p.k_norm;
  rope_kv_head_with(
      p, row, h, x, lane, slot, norm != nullptr,
      [&](int f, float &c, float &s) { rope_cos_sin(p, p.positions[row], f, c, s); },
      [&](int i) { return __bfloat162float(norm[i]); });
}
#endif

}  // namespace vegas::kernels
