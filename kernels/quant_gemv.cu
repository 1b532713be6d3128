// quant_gemv / quant_dequantize (quant_gemv.cuh).
//
// quant_gemv: each warp owns R output rows (blocks of 4 warps, no shared
// memory, no barrier: warps stream independently, and a matrix of a few
// thousand rows still spreads over every SM), or with a matrix of few rows
// one slice of k of them (quant_gemv_split: S warps a row, their sums added
// in the block). Per step a lane reads 16 bytes
// of each of its rows (Q8_0: 16 values, half a block; Q4_0: one whole block
// of 32), so each load instruction reads 512 contiguous bytes, and the
// matching input values straight from global memory (L1-resident: every warp
// of an SM reads the same few KB). Quantized values become floats without
// the (slow) conversion unit: a byte b placed in the mantissa of 2^23 reads as
// 2^23 + b, and one subtraction leaves b minus its offset, exactly; a bf16 is
// its bits shifted up. A lane's values share one scale per row: their dot
// products are summed first and scaled once; partial sums stay in f32 per
// lane and are reduced across the warp at the end. F8 codes take the
// hardware's e4m3x2 -> f16x2 conversion (exact), 16 values a lane like Q8_0.
#include <cuda_fp8.h>

#include <cstdlib>

#include "quant_gemv.cuh"
#include "quant_lanes.cuh"

namespace vegas::kernels {

namespace {

using namespace quant_lanes;

// Rows per warp: 4 with up to 4 input rows, else 2 (registers); one input
// row takes launch_gemv's choice.
template <int M>
constexpr int kRowsPerWarp = M <= 4 ? 4 : 2;

// Values of one lane per 16-byte step.
template <QuantFormat F>
constexpr int kLaneValues = F == QuantFormat::kQ4_0 ? 32 : 16;

// The four e4m3 codes of a word as floats, exactly.
__device__ __forceinline__ float4 e4m3x4(uint32_t word) {
  const __half2_raw lo =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word & 0xffffu), __NV_E4M3);
  const __half2_raw hi =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> 16), __NV_E4M3);
  const float2 a = __half22float2(__half2(lo)), b = __half22float2(__half2(hi));
  return make_float4(a.x, a.y, b.x, b.y);
}

// Lane's dot product of one row's 16 bytes with the input values xs.
template <QuantFormat F>
__device__ __forceinline__ float lane_dot(const uint4 &w, const float4 (&xs)[kLaneValues<F> / 4]) {
  const uint32_t words[4] = {w.x, w.y, w.z, w.w};
  float d = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (F == QuantFormat::kF8) {
      const float4 v = e4m3x4(words[i]);
      d = dot4(xs[i], v.x, v.y, v.z, v.w, d);
    } else if constexpr (F == QuantFormat::kQ8_0) {
      const uint32_t u = words[i] ^ 0x80808080u;  // int8 q as the byte q + 128
      d = dot4(xs[i], magic_byte(u, 0) - 8388736.0f, magic_byte(u, 1) - 8388736.0f,
               magic_byte(u, 2) - 8388736.0f, magic_byte(u, 3) - 8388736.0f, d);  // 2^23 + 128
    } else {
      // Bytes 4i .. 4i + 3: values 4i .. 4i + 3 low, 16 + 4i .. high.
      const uint32_t lo = words[i] & 0x0f0f0f0fu, up = (words[i] >> 4) & 0x0f0f0f0fu;
      d = dot4(xs[i], magic_byte(lo, 0) - 8388616.0f, magic_byte(lo, 1) - 8388616.0f,
               magic_byte(lo, 2) - 8388616.0f, magic_byte(lo, 3) - 8388616.0f, d);  // 2^23 + 8
      d = dot4(xs[i + 4], magic_byte(up, 0) - 8388616.0f, magic_byte(up, 1) - 8388616.0f,
               magic_byte(up, 2) - 8388616.0f, magic_byte(up, 3) - 8388616.0f, d);
    }
  }
  return d;
}

// The arrays of the matrix a warp reads: the launch's `w`, or with the SwiGLU
// epilogue the up half's (QuantGemvParams::swiglu_up).
struct MatrixArrays {
  const uint8_t *qs;
  const f16 *scales;
  const float *scales_f32;
};

// One loop trip's loads of a warp: U warp steps from input value v0 on, each
// a lane's 16 bytes of its R rows and their scales.
template <QuantFormat F, int U, int R>
__device__ __forceinline__ void load_trip(const MatrixArrays &a, int k, int end,
                                          const int (&rows)[R], int v0, uint4 (&w)[U][R],
                                          float (&scale)[U][R]) {
  constexpr int V = kLaneValues<F>;
  const int64_t row_bytes = quant_row_bytes(F, k);
  const int scales_per_row = k / kQuantBlock;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int vu = v0 + u * 32 * V;  // a slice is a multiple of 32 V: warp-uniform
    if (vu >= end) break;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      w[u][r] = __ldg(
          reinterpret_cast<const uint4 *>(a.qs + rows[r] * row_bytes + quant_row_bytes(F, vu)));
      if constexpr (F == QuantFormat::kF8)
        scale[u][r] =
            __ldg(a.scales_f32 + static_cast<int64_t>(rows[r]) * (k / kF8Group) + vu / kF8Group);
      else
        scale[u][r] = __half2float(
            a.scales[static_cast<int64_t>(rows[r]) * scales_per_row + vu / kQuantBlock]);
    }
  }
}

// U warp steps per loop trip, their weight loads all in flight before any
// math (a step of a few thousand rows is 1-2 MB in flight across the GPU,
// short of what hides HBM's latency); with several input rows the next
// trip's are issued before this one's math, so that a warp has two trips of
// loads in flight. The weights do not depend on the previous kernel: the
// first trip's are requested before the PDL wait, which the input rows follow.
// S > 1: each warp sums its rows over one slice of k (quant_gemv_split);
// kSwiglu (QuantGemvParams::swiglu_up): the gate's rows and the same rows of
// up in two halves of the block (SplitLayout), which combines them.
template <int M, QuantFormat F, int U, int R, bool kSwiglu, int S>
__global__ void __launch_bounds__(SplitLayout<S, kSwiglu>::kThreads)
    quant_gemv_kernel(QuantGemvParams p) {
  using Layout = SplitLayout<S, kSwiglu>;
  constexpr int V = kLaneValues<F>;
  constexpr int kTrip = U * 32 * V;
  // Two trips in flight at several input rows; at one, where U steps a trip
  // are in flight already, the second trip's registers cost more than it hid
  // (the commit has the timings).
  constexpr bool kPipelined = M > 1;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int k = p.w.k, n_rows = p.w.n;
  const int split = warp % S, slot = warp / S % Layout::kSlots;
  const int row0 = (blockIdx.x * Layout::kSlots + slot) * R;
  const int begin = split * (k / S), end = begin + k / S;
  const bool up = kSwiglu && warp / S / Layout::kSlots == 1;
  const MatrixArrays a = {up ? p.swiglu_up.qs : p.w.qs, up ? p.swiglu_up.scales : p.w.scales,
                          up ? p.swiglu_up.scales_f32 : p.w.scales_f32};
  // warp-uniform; no barrier follows but store_block's
  constexpr bool kBlockStore = kSwiglu || S > 1;
  const bool active = row0 < n_rows;
  // Rows past the end read row n_rows - 1 again and store nothing.
  int rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = min(row0 + r, n_rows - 1);
  uint4 w[U][R];
  float scale[U][R];
  if (active) load_trip<F, U, R>(a, k, end, rows, begin + lane * V, w, scale);
  pdl_enter();
  if (!kBlockStore && !active) return;
  float acc[R][M] = {};
  for (int v0 = begin + lane * V; active && v0 < end; v0 += kTrip) {
    uint4 w_next[U][R];
    float scale_next[U][R];
    if (kPipelined && v0 + kTrip < end)
      load_trip<F, U, R>(a, k, end, rows, v0 + kTrip, w_next, scale_next);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int vu = v0 + u * 32 * V;
      if (vu >= end) break;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float4 xs[V / 4];
        load_x<V / 4>(p.x + static_cast<int64_t>(m) * k + vu, xs);
#pragma unroll
        for (int r = 0; r < R; ++r)
          acc[r][m] = fmaf(lane_dot<F>(w[u][r], xs), scale[u][r], acc[r][m]);
      }
    }
    if constexpr (kPipelined) {
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r) {
          w[u][r] = w_next[u][r];
          scale[u][r] = scale_next[u][r];
        }
    } else if (v0 + kTrip < end) {
      load_trip<F, U, R>(a, k, end, rows, v0 + kTrip, w, scale);
    }
  }
  if constexpr (kBlockStore)
    store_block<R, M, S, kSwiglu>(p, acc, warp, lane);
  else
    store_rows<R, M>(p, acc, row0, lane);
}

// Rows a warp at one input row: `fallback` (the format's measured best)
// unless VEGAS_CUDA_QUANT_ROWS says 1, 2 or 4 (A/B timing).
int single_row_rows(int fallback) {
  static const int forced = env_knob("VEGAS_CUDA_QUANT_ROWS", 0);
  return forced == 1 || forced == 2 || forced == 4 ? forced : fallback;
}

template <int M, QuantFormat F, int U, int R, bool kSwiglu, int S>
cudaError_t launch_split(const QuantGemvParams &p, cudaStream_t stream) {
  using Layout = SplitLayout<S, kSwiglu>;
  const int rows_per_block = Layout::kSlots * R;
  const dim3 grid((p.w.n + rows_per_block - 1) / rows_per_block);
  return launch_kernel(quant_gemv_kernel<M, F, U, R, kSwiglu, S>, grid, dim3(Layout::kThreads), 0,
                       stream, p);
}

template <int M, QuantFormat F, int U, int R, bool kSwiglu>
cudaError_t launch_slices(const QuantGemvParams &p, int split, cudaStream_t stream) {
  return for_split(split, [&](auto slices) {
    return launch_split<M, F, U, R, kSwiglu, decltype(slices)::value>(p, stream);
  });
}

template <int M, QuantFormat F, bool kSwiglu>
cudaError_t launch_gemv(const QuantGemvParams &p, int split, cudaStream_t stream) {
  if constexpr (M == 1) {
    // One row a warp (four times the warps) for the 16-values-a-lane formats,
    // four for Q4_0's 32; two warp steps a trip, but one for Q8_0 at one row
    // a warp (the commits have the timings). A matrix summed in slices takes
    // these whatever VEGAS_CUDA_QUANT_ROWS / _UNROLL say.
    constexpr int kRows = F == QuantFormat::kQ4_0 ? 4 : 1;
    constexpr int kSteps = F == QuantFormat::kQ8_0 ? 1 : 2;
    if (split > 1) return launch_slices<M, F, kSteps, kRows, kSwiglu>(p, split, stream);
    return for_one_two_four(single_row_rows(kRows), [&](auto rows) {
      constexpr int R = decltype(rows)::value;
      const int u = single_row_unroll(F == QuantFormat::kQ8_0 && R == 1 ? 1 : 2);
      return for_one_two_four(u, [&](auto steps) {
        return launch_split<M, F, decltype(steps)::value, R, kSwiglu, 1>(p, stream);
      });
    });
  }
  return launch_slices<M, F, 1, kRowsPerWarp<M>, kSwiglu>(p, split, stream);
}

template <QuantFormat F>
cudaError_t launch_gemv_rows(const QuantGemvParams &p, cudaStream_t stream) {
  const bool swiglu = p.swiglu_up.qs != nullptr;
  const int split = quant_gemv_split(F, p.w.n, p.w.k);
  return for_input_rows(p.m, [&](auto m) {
    constexpr int M = decltype(m)::value;
    return swiglu ? launch_gemv<M, F, true>(p, split, stream)
                  : launch_gemv<M, F, false>(p, split, stream);
  });
}

// Values v times scale as bf16, the t-th group of 8 of `out` (one 16-byte store).
__device__ __forceinline__ void store_scaled_bf16x8(bf16 *out, int64_t t, float scale,
                                                    const float (&v)[8]) {
  uint4 packed;
  uint32_t *o = reinterpret_cast<uint32_t *>(&packed);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(scale * v[2 * i], scale * v[2 * i + 1]);
    o[i] = *reinterpret_cast<const uint32_t *>(&pair);
  }
  reinterpret_cast<uint4 *>(out)[t] = packed;
}

// One thread per 8 values (a quarter block), so that a warp's stores are
// 512 contiguous bytes.
__global__ void quant_dequantize_kernel(QuantDequantizeParams p) {
  pdl_enter();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t b = t / 4, part = t % 4;
  if (b >= static_cast<int64_t>(p.w.n) * (p.w.k / kQuantBlock)) return;
  const float scale = __half2float(p.w.scales[b]);
  float v[8];
  if (p.w.format == QuantFormat::kQ8_0) {
    const uint2 q = *reinterpret_cast<const uint2 *>(p.w.qs + b * kQuantBlock + 8 * part);
    const uint32_t words[2] = {q.x ^ 0x80808080u, q.y ^ 0x80808080u};
#pragma unroll
    for (int i = 0; i < 8; ++i)
      v[i] = __int_as_float(__byte_perm(words[i / 4], 0x4b000000u, 0x7440u + i % 4)) - 8388736.0f;
  } else {
    // Values 8 part .. + 7: low nibbles of bytes 0-15 are values 0-15, high
    // nibbles values 16-31.
    const uint2 q =
        *reinterpret_cast<const uint2 *>(p.w.qs + b * (kQuantBlock / 2) + 8 * (part % 2));
    const int shift = part < 2 ? 0 : 4;
    const uint32_t words[2] = {(q.x >> shift) & 0x0f0f0f0fu, (q.y >> shift) & 0x0f0f0f0fu};
#pragma unroll
    for (int i = 0; i < 8; ++i)
      v[i] = __int_as_float(__byte_perm(words[i / 4], 0x4b000000u, 0x7440u + i % 4)) - 8388616.0f;
  }
  store_scaled_bf16x8(p.out, t, scale, v);
}

// F8: one thread per 8 values, a warp's stores 512 contiguous bytes.
__global__ void f8_dequantize_kernel(QuantDequantizeParams p) {
  pdl_enter();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= static_cast<int64_t>(p.w.n) * p.w.k / 8) return;
  const uint2 q = *reinterpret_cast<const uint2 *>(p.w.qs + 8 * t);
  const float scale = p.w.scales_f32[8 * t / kF8Group];
  const float4 a = e4m3x4(q.x), b = e4m3x4(q.y);
  const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  store_scaled_bf16x8(p.out, t, scale, v);
}

// Warps a block of the tensor-core kernel (every format), 0 for the CUDA-core kernel:
// 8 when asked (Qwen3-8B shapes: 4 and 16 were slower; the commit has the
// timings). VEGAS_CUDA_QUANT_MMA (A/B timing): 0 never, 1 always, 4 / 8 /
// 16 always with that many.
int mma_split(bool asked) {
  static const int forced = [] {
    const char *env = std::getenv("VEGAS_CUDA_QUANT_MMA");
    if (env == nullptr || *env == '\0') return -1;
    const int v = std::atoi(env);
    return v == 0 ? 0 : v == 4 || v == 16 ? v : 8;
  }();
  return forced >= 0 ? forced : asked ? 8 : 0;
}

}  // namespace

bool quant_gemv_supports(QuantFormat f, int32_t m, int32_t k) {
  return m >= 1 && m <= kQuantGemvMaxRows && k > 0 && k % quant_gemv_k_align(f) == 0;
}

bool quant_gemv_swiglu_supports(QuantFormat f) {
  return f == QuantFormat::kF8 || f == QuantFormat::kQ8_0 || f == QuantFormat::kQ4_0;
}

namespace {

bool arrays_fit(const QuantMatrix &w) {
  return w.qs != nullptr && (w.scales == nullptr) == (quant_row_scales(w.format, w.k) == 0) &&
         (w.scales_f32 == nullptr) == (quant_row_scales_f32(w.format, w.k) == 0);
}

// The SwiGLU epilogue's extra conditions: an up matrix shaped as the gate, a
// bf16 output stored (not added to).
bool swiglu_fits(const QuantGemvParams &p) {
  const QuantMatrix &u = p.swiglu_up;
  return quant_gemv_swiglu_supports(p.w.format) && u.format == p.w.format && u.n == p.w.n &&
         u.k == p.w.k && arrays_fit(u) && p.y_bf16 != nullptr && !p.accumulate;
}

}  // namespace

int quant_gemv_max_rows(QuantFormat f, bool tensor_cores) {
  return mma_split(tensor_cores) > 0 && quant_gemv_mma_supports(f) ? quant_gemv_mma_max_rows(f)
                                                                   : kQuantGemvMaxRows;
}

cudaError_t quant_gemv(const QuantGemvParams &p, cudaStream_t stream) {
  if (!quant_gemv_supports(p.w.format, 1, p.w.k) || p.m < 1 ||
      p.m > quant_gemv_max_rows(p.w.format, p.tensor_cores) || p.w.n <= 0 || p.x == nullptr ||
      (p.y_f32 == nullptr) == (p.y_bf16 == nullptr) || !arrays_fit(p.w) ||
      (p.ldy != 0 && p.ldy < p.w.n) || (p.swiglu_up.qs != nullptr && !swiglu_fits(p)))
    return cudaErrorInvalidValue;
  if (const int split = mma_split(p.tensor_cores); split > 0 && quant_gemv_mma_supports(p.w.format))
    return quant_gemv_mma(p, split, stream);
  switch (p.w.format) {
    case QuantFormat::kQ8_0:
      return launch_gemv_rows<QuantFormat::kQ8_0>(p, stream);
    case QuantFormat::kQ4_0:
      return launch_gemv_rows<QuantFormat::kQ4_0>(p, stream);
    case QuantFormat::kF8:
      return launch_gemv_rows<QuantFormat::kF8>(p, stream);
    default:
      return quant_gemv_k(p, stream);
  }
}

cudaError_t quant_dequantize(const QuantDequantizeParams &p, cudaStream_t stream) {
  if (quant_is_k(p.w.format)) return quant_dequantize_k(p, stream);
  if (p.w.format == QuantFormat::kF8) {
    if (p.w.k <= 0 || p.w.k % kF8Group != 0 || p.w.n <= 0 || p.out == nullptr ||
        p.w.qs == nullptr || p.w.scales_f32 == nullptr)
      return cudaErrorInvalidValue;
    const int64_t threads = static_cast<int64_t>(p.w.n) * p.w.k / 8;
    return launch_kernel(f8_dequantize_kernel, dim3(static_cast<unsigned>((threads + 255) / 256)),
                         dim3(256), 0, stream, p);
  }
  if (p.w.k <= 0 || p.w.k % kQuantBlock != 0 || p.w.n <= 0 || p.out == nullptr)
    return cudaErrorInvalidValue;
  const int64_t threads = static_cast<int64_t>(p.w.n) * (p.w.k / kQuantBlock) * 4;
  return launch_kernel(quant_dequantize_kernel, dim3(static_cast<unsigned>((threads + 255) / 256)),
                       dim3(256), 0, stream, p);
}

}  // namespace vegas::kernels
