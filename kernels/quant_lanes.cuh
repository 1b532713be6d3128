// Device helpers the quant_gemv kernels share (quant_gemv.cu, quant_gemv_k.cu).
#pragma once

#include <type_traits>

#include "cuda_utils.cuh"
#include "quant_gemv.cuh"
#include "swiglu.cuh"

namespace vegas::kernels::quant_lanes {

// Byte `i` of u as a float 2^23 + byte (selector: byte i, zeros, 0x4b).
__device__ __forceinline__ float magic_byte(uint32_t u, int i) {
  return __int_as_float(__byte_perm(u, 0x4b000000u, 0x7440u + i));
}

// The two bf16 of a 32-bit word as floats.
__device__ __forceinline__ float bf16_lo(uint32_t w) {
  return __int_as_float(w << 16);
}
__device__ __forceinline__ float bf16_hi(uint32_t w) {
  return __int_as_float(w & 0xffff0000u);
}

// Input values [v0, v0 + 4 * n4) of one row as floats, n4 float4s.
template <int N4>
__device__ __forceinline__ void load_x(const bf16 *x, float4 (&out)[N4]) {
#pragma unroll
  for (int i = 0; i < N4; i += 2) {
    const uint4 u = __ldg(reinterpret_cast<const uint4 *>(x) + i / 2);
    out[i] = make_float4(bf16_lo(u.x), bf16_hi(u.x), bf16_lo(u.y), bf16_hi(u.y));
    out[i + 1] = make_float4(bf16_lo(u.z), bf16_hi(u.z), bf16_lo(u.w), bf16_hi(u.w));
  }
}

__device__ __forceinline__ float dot4(const float4 &x, float a, float b, float c, float d,
                                      float acc) {
  return fmaf(x.x, a, fmaf(x.y, b, fmaf(x.z, c, fmaf(x.w, d, acc))));
}

// Byte i (0..11) of a Q4_K block's 12 scale bytes (words y, z, w of its head).
__device__ __forceinline__ uint32_t scale_byte(const uint4 &head, int i) {
  const uint32_t w = i < 4 ? head.y : (i < 8 ? head.z : head.w);
  return (w >> (8 * (i & 3))) & 0xffu;
}

// The 6-bit scale and min of sub-block j (gguf/ggml_types.cpp, k_scale_min).
__device__ __forceinline__ void scale_min(const uint4 &head, int j, float &sc, float &m) {
  if (j < 4) {
    sc = static_cast<float>(scale_byte(head, j) & 63u);
    m = static_cast<float>(scale_byte(head, j + 4) & 63u);
  } else {
    sc = static_cast<float>((scale_byte(head, j + 4) & 0x0fu) |
                            ((scale_byte(head, j - 4) >> 6) << 4));
    m = static_cast<float>((scale_byte(head, j + 4) >> 4) | ((scale_byte(head, j) >> 6) << 4));
  }
}

__device__ __forceinline__ float half_bits(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

// The output's row stride: QuantGemvParams::ldy, or the matrix's rows.
__device__ __forceinline__ int output_stride(const QuantGemvParams &p) {
  return p.ldy > 0 ? p.ldy : p.w.n;
}

// Output `at` (m * ldy + n) as f32 (stored or added to) or bf16.
__device__ __forceinline__ void store_output(const QuantGemvParams &p, int64_t at, float v) {
  if (p.y_f32 != nullptr)
    p.y_f32[at] = p.accumulate ? p.y_f32[at] + v : v;
  else
    p.y_bf16[at] = __float2bfloat16(v);
}

// SwiGLU output `at` (m * ldy + n) from the gate's and up's sums.
__device__ __forceinline__ void store_swiglu(const QuantGemvParams &p, int64_t at, float gate,
                                             float up) {
  p.y_bf16[at] = swiglu_value(__bfloat162float(__float2bfloat16(gate)),
                              __bfloat162float(__float2bfloat16(up)));
}

// The warp's sums of rows row0.. (R of them, those below n_rows) for its M
// input rows, reduced across the lanes and stored by lane 0: y[m][ldy].
template <int R, int M>
__device__ __forceinline__ void store_rows(const QuantGemvParams &p, const float (&acc)[R][M],
                                           int row0, int lane) {
  const int n_rows = p.w.n, ldy = output_stride(p);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int n = row0 + r;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float v = warp_sum(acc[r][m]);
      if (lane != 0 || n >= n_rows) continue;
      store_output(p, static_cast<int64_t>(m) * ldy + n, v);
    }
  }
}

// Slices of k: S (1 or 2) warps of one block sum one output row over k / S
// consecutive values each, and the block adds their sums in slice order. A
// matrix of few rows (o and down of an 8B model: a wave of warps or less at
// one input row) gets twice the warps, so that more of its bytes are in
// flight. A block's four warps are numbered (half * kSlots + slot) * S +
// split: kSlots groups of R rows, each summed by S warps (with SwiGLU's
// epilogue the gate rows are half 0 and the same rows of up half 1).
template <int S, bool kSwiglu>
struct SplitLayout {
  static_assert(S == 1 || S == 2, "one or two slices");
  static constexpr int kHalves = kSwiglu ? 2 : 1;
  static constexpr int kWarps = 4;
  static constexpr int kSlots = kWarps / (kHalves * S);
  static constexpr int kThreads = kWarps * 32;
};

// The slices a matrix's rows are summed in: two where 2n stays within 8192
// rows (F8: 0, never: its one-row kernel was slower in slices) and each
// slice is a multiple of the format's warp step of at least 2048 values,
// else one (Qwen3-8B shapes: also qkv in two, down alone in two or down in
// four were slower; the commit has the timings). It depends on the matrix
// only (format, n, k), never on the input rows, so that a row's sums keep
// their bits at any row count (and the SwiGLU epilogue those of its two
// GEMVs). A/B knobs: VEGAS_CUDA_QUANT_SPLIT_ROWS (_F8), _SLICE.
inline int quant_gemv_split(QuantFormat f, int n, int k) {
  static const int rows = env_knob("VEGAS_CUDA_QUANT_SPLIT_ROWS", 8192);
  static const int rows_f8 = env_knob("VEGAS_CUDA_QUANT_SPLIT_ROWS_F8", 0);
  static const int min_slice = env_knob("VEGAS_CUDA_QUANT_SPLIT_SLICE", 2048);
  const int64_t limit = f == QuantFormat::kF8 ? rows_f8 : rows;
  const bool two =
      int64_t{n} * 2 <= limit && k % (2 * quant_gemv_k_align(f)) == 0 && k / 2 >= min_slice;
  return two ? 2 : 1;
}

// launch(std::integral_constant<int, S>{}) for S = split (1 or 2).
template <typename Launch>
cudaError_t for_split(int split, Launch &&launch) {
  if (split == 2) return launch(std::integral_constant<int, 2>{});
  return launch(std::integral_constant<int, 1>{});
}

// The sums of a block whose rows were summed in slices (S > 1) or whose
// output is SwiGLU's: each warp's sums meet in shared memory, then a thread
// an output adds a row's slices in order and stores it (y[m][ldy], or the
// SwiGLU of its gate and up sums).
template <int R, int M, int S, bool kSwiglu>
__device__ __forceinline__ void store_block(const QuantGemvParams &p, const float (&acc)[R][M],
                                            int warp, int lane) {
  using L = SplitLayout<S, kSwiglu>;
  __shared__ float sums[L::kWarps][R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float v = warp_sum(acc[r][m]);
      if (lane == 0) sums[warp][r][m] = v;
    }
  __syncthreads();
  static_assert(L::kSlots * R * M <= L::kThreads, "a thread an output");
  const int t = threadIdx.x, slot = t / (R * M), r = t / M % R, m = t % M;
  const int row = (blockIdx.x * L::kSlots + slot) * R + r;
  if (t >= L::kSlots * R * M || row >= p.w.n) return;
  auto slices = [&](int half) {
    const int w0 = (half * L::kSlots + slot) * S;
    float v = sums[w0][r][m];
#pragma unroll
    for (int s = 1; s < S; ++s) v += sums[w0 + s][r][m];
    return v;
  };
  const int64_t at = static_cast<int64_t>(m) * output_stride(p) + row;
  if constexpr (kSwiglu)
    store_swiglu(p, at, slices(0), slices(1));
  else
    store_output(p, at, slices(0));
}

// Warp steps a loop trip of the GEMVs at one input row: `fallback` (the
// format's measured best) unless VEGAS_CUDA_QUANT_UNROLL says 1, 2 or 4 (A/B
// timing). With more input rows each step's math hides the next loads
// already (Qwen3-8B Q8_0 at batch 4 was slower at 2).
inline int single_row_unroll(int fallback) {
  static const int forced = env_knob("VEGAS_CUDA_QUANT_UNROLL", 0);
  return forced == 1 || forced == 2 || forced == 4 ? forced : fallback;
}

// launch(std::integral_constant<int, N>{}) for N = n of 1, 2 or 4 (else 1):
// warp steps a trip or rows a warp, instantiated per value.
template <typename Launch>
cudaError_t for_one_two_four(int n, Launch &&launch) {
  if (n == 4) return launch(std::integral_constant<int, 4>{});
  if (n == 2) return launch(std::integral_constant<int, 2>{});
  return launch(std::integral_constant<int, 1>{});
}

// launch(std::integral_constant<int, M>{}) for M = m (1..7, else 8): the
// kernels are instantiated per count of input rows.
template <typename Launch>
cudaError_t for_input_rows(int m, Launch &&launch) {
  switch (m) {
    case 1:
      return launch(std::integral_constant<int, 1>{});
    case 2:
      return launch(std::integral_constant<int, 2>{});
    case 3:
      return launch(std::integral_constant<int, 3>{});
    case 4:
      return launch(std::integral_constant<int, 4>{});
    case 5:
      return launch(std::integral_constant<int, 5>{});
    case 6:
      return launch(std::integral_constant<int, 6>{});
    case 7:
      return launch(std::integral_constant<int, 7>{});
    default:
      return launch(std::integral_constant<int, 8>{});
  }
}

}  // namespace vegas::kernels::quant_lanes
