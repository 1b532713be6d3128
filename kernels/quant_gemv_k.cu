// quant_gemv and quant_dequantize for the K formats (quant_gemv.cuh).
//
// A warp step covers four super-blocks (1,024 values), eight lanes each.
// Lane t (0..7) of a super-block reads 16 bytes of its quants, which hold two
// runs of 16 consecutive values with one scale each (KRun), and the bytes
// those scales come from (Q4_K, Q5_K: the 16-byte head of the block, shared
// by its eight lanes; Q6_K: the block's 16 int8 scales and its f16 d); Q5_K
// lanes also read the 16 bytes of high bits their runs' values share. A run's
// values are scale * (q - offset) - min, with q the unsigned quant (Q4_K,
// Q5_K: offset 0, min dmin * m; Q6_K: offset 32, min 0), so a lane's dot product
// with the input is scale * sum(x * (q - offset)) - min * sum(x), and the sum
// of x is shared by every weight row of the warp. Otherwise as quant_gemv.cu:
// warps stream their rows independently, partial sums stay per lane.
#include "quant_gemv.cuh"
#include "quant_lanes.cuh"

namespace vegas::kernels {

namespace {

using namespace quant_lanes;

constexpr int kLanesPerBlock = 8;  // lanes of one super-block in a warp step
constexpr int kBlocksPerStep = 32 / kLanesPerBlock;

// Rows per warp: 2 for one input row (more, smaller warps keep more loads in
// flight; 4 and 8 measured slower), 4 up to four input rows (each row
// decoded once for all of them), else 2 (registers).
template <int M>
constexpr int kRowsPerWarp = M == 1   ? 2
                             : M <= 4 ? 4
                                      : 2;

// 16 consecutive values of one row: quants as bytes (4 per word) and how
// they scale.
struct KRun {
  uint32_t q[4];
  float scale, min;
};

template <QuantFormat F>
constexpr float kQuantOffset = F == QuantFormat::kQ6_K ? 32.0f : 0.0f;

// Q4_K and Q5_K: 6-bit scales and mins in a 16-byte head, nibbles in the same order.
template <QuantFormat F>
constexpr bool kHeadScales = F == QuantFormat::kQ4_K || F == QuantFormat::kQ5_K;

// Where lane t's two runs start in its super-block.
template <QuantFormat F>
__device__ __forceinline__ int run_a_offset(int t) {
  return kHeadScales<F> ? 64 * (t >> 1) + 16 * (t & 1) : 128 * (t >> 2) + 16 * (t & 3);
}
template <QuantFormat F>
constexpr int kRunBDistance = kHeadScales<F> ? 32 : 64;

// The bytes lane t reads of one super-block (Q4_K: the block's head and 16
// bytes of nibbles; Q5_K: those and 16 bytes of high bits; Q6_K: 16 bytes
// each of ql, qh and the scales, and d).
struct KRaw {
  uint4 w0, w1, w2;
  f16 d;
};

template <QuantFormat F>
__device__ __forceinline__ void k_load(const uint8_t *block, const f16 *d6, int t, KRaw &raw) {
  if constexpr (F == QuantFormat::kQ4_K) {
    raw.w0 = __ldg(reinterpret_cast<const uint4 *>(block));
    raw.w1 = __ldg(reinterpret_cast<const uint4 *>(block + 16 + 16 * t));
  } else if constexpr (F == QuantFormat::kQ5_K) {  // head, qh[32], qs[128]
    raw.w0 = __ldg(reinterpret_cast<const uint4 *>(block));
    raw.w1 = __ldg(reinterpret_cast<const uint4 *>(block + 48 + 16 * t));
    raw.w2 = __ldg(reinterpret_cast<const uint4 *>(block + 16 + 16 * (t & 1)));
  } else {
    const int half = t >> 2, part = t & 3;
    raw.w0 = __ldg(reinterpret_cast<const uint4 *>(block + 64 * half + 16 * part));
    raw.w1 = __ldg(reinterpret_cast<const uint4 *>(block + 128 + 32 * half + 16 * (part & 1)));
    raw.w2 = __ldg(reinterpret_cast<const uint4 *>(block + 192));
    raw.d = __ldg(d6);
  }
}

// Lane t's two runs from its bytes. Every scale is exact in f32 (an f16
// times an integer of at most 8 bits), as in gguf::dequantize.
template <QuantFormat F>
__device__ __forceinline__ void k_decode(const KRaw &raw, int t, KRun &a, KRun &b) {
  if constexpr (kHeadScales<F>) {
    const uint4 &head = raw.w0, &q = raw.w1;
    const float d = half_bits(head.x & 0xffffu), dmin = half_bits(head.x >> 16);
    const int j = 2 * (t >> 1);  // sub-blocks j (low nibbles) and j + 1 (high)
    float sc, m;
    scale_min(head, j, sc, m);
    a.scale = d * sc;
    a.min = dmin * m;
    scale_min(head, j + 1, sc, m);
    b.scale = d * sc;
    b.min = dmin * m;
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      a.q[i] = words[i] & 0x0f0f0f0fu;
      b.q[i] = (words[i] >> 4) & 0x0f0f0f0fu;
    }
    if constexpr (F == QuantFormat::kQ5_K) {
      // Bit j of qh[l] is the fifth bit of value 32 j + l: sub-blocks j and j + 1 here.
      const uint32_t high[4] = {raw.w2.x, raw.w2.y, raw.w2.z, raw.w2.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a.q[i] |= ((high[i] >> j) & 0x01010101u) << 4;
        b.q[i] |= ((high[i] >> (j + 1)) & 0x01010101u) << 4;
      }
    }
  } else {
    const int half = t >> 2, part = t & 3;
    const uint4 &ql = raw.w0, &qh = raw.w1, &scales = raw.w2;
    const float d = __half2float(raw.d);
    auto scale = [&](int i) {  // int8 scale i of 16, without indexing a register array
      const uint32_t w = i < 8 ? (i < 4 ? scales.x : scales.y) : (i < 12 ? scales.z : scales.w);
      return static_cast<float>(static_cast<int8_t>((w >> (8 * (i & 3))) & 0xffu));
    };
    a.scale = d * scale(8 * half + part);
    b.scale = d * scale(8 * half + part + 4);
    a.min = b.min = 0.0f;
    const int shift = part < 2 ? 0 : 2;  // qh bits of the low-nibble run; +4 for the high one
    const uint32_t lo[4] = {ql.x, ql.y, ql.z, ql.w}, hi[4] = {qh.x, qh.y, qh.z, qh.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      a.q[i] = (lo[i] & 0x0f0f0f0fu) | (((hi[i] >> shift) & 0x03030303u) << 4);
      b.q[i] = ((lo[i] >> 4) & 0x0f0f0f0fu) | (((hi[i] >> (shift + 4)) & 0x03030303u) << 4);
    }
  }
}

// Q6_K's d of super-block `index` (row-major), the others none.
template <QuantFormat F>
__device__ __forceinline__ const f16 *k_d6(const QuantMatrix &w, int64_t index) {
  return F == QuantFormat::kQ6_K ? w.scales + index : nullptr;
}

template <QuantFormat F>
__device__ __forceinline__ void k_lane(const uint8_t *block, const f16 *d6, int t, KRun &a,
                                       KRun &b) {
  KRaw raw;
  k_load<F>(block, d6, t, raw);
  k_decode<F>(raw, t, a, b);
}

// sum over the run's 16 values of x * (q - offset).
template <QuantFormat F>
__device__ __forceinline__ float run_dot(const KRun &r, const float4 (&x)[4]) {
  constexpr float magic = 8388608.0f + kQuantOffset<F>;  // 2^23 + offset
  float d = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    d = dot4(x[i], magic_byte(r.q[i], 0) - magic, magic_byte(r.q[i], 1) - magic,
             magic_byte(r.q[i], 2) - magic, magic_byte(r.q[i], 3) - magic, d);
  return d;
}

__device__ __forceinline__ float run_sum(const float4 (&x)[4]) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) s += (x[i].x + x[i].y) + (x[i].z + x[i].w);
  return s;
}

// U warp steps per loop trip: their blocks' loads all in flight before any
// decoding (as quant_gemv.cu's kernel; blocks is a multiple of four, so
// whether a step exists is warp-uniform). S > 1: each warp sums its rows
// over one slice of k (quant_gemv_split), the block adds the slices.
template <int M, QuantFormat F, int U, int S>
__global__ void __launch_bounds__(SplitLayout<S, false>::kThreads)
    quant_gemv_k_kernel(QuantGemvParams p) {
  pdl_enter();
  using Layout = SplitLayout<S, false>;
  constexpr int R = kRowsPerWarp<M>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane % kLanesPerBlock;
  const int k = p.w.k, n_rows = p.w.n;
  const int split = warp % S, row0 = (blockIdx.x * Layout::kSlots + warp / S) * R;
  const bool active = row0 < n_rows;  // warp-uniform; no barrier follows but store_block's
  if (S == 1 && !active) return;
  const int64_t row_bytes = quant_row_bytes(F, k);
  const int blocks = k / kQuantSuperBlock, begin = split * (blocks / S), end = begin + blocks / S;
  int rows[R];  // rows past the end read row n_rows - 1 again and store nothing
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = min(row0 + r, n_rows - 1);
  const int off_a = run_a_offset<F>(t), off_b = off_a + kRunBDistance<F>;
  float acc[R][M] = {};
  for (int sb0 = begin + lane / kLanesPerBlock; active && sb0 < end; sb0 += U * kBlocksPerStep) {
    KRaw raw[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int sb = sb0 + u * kBlocksPerStep;
      if (sb >= end) break;
#pragma unroll
      for (int r = 0; r < R; ++r)
        k_load<F>(p.w.qs + rows[r] * row_bytes + sb * quant_super_block_bytes(F),
                  k_d6<F>(p.w, static_cast<int64_t>(rows[r]) * blocks + sb), t, raw[u][r]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int sb = sb0 + u * kBlocksPerStep;
      if (sb >= end) break;
      KRun ra[R], rb[R];  // decoded once, used by every input row
#pragma unroll
      for (int r = 0; r < R; ++r) k_decode<F>(raw[u][r], t, ra[r], rb[r]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const bf16 *x = p.x + static_cast<int64_t>(m) * k + sb * kQuantSuperBlock;
        float4 xa[4], xb[4];
        load_x<4>(x + off_a, xa);
        load_x<4>(x + off_b, xb);
        float sum_a = 0.0f, sum_b = 0.0f;
        if constexpr (kHeadScales<F>) {
          sum_a = run_sum(xa);
          sum_b = run_sum(xb);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float v = fmaf(ra[r].scale, run_dot<F>(ra[r], xa), acc[r][m]);
          v = fmaf(rb[r].scale, run_dot<F>(rb[r], xb), v);
          if constexpr (kHeadScales<F>) v -= fmaf(ra[r].min, sum_a, rb[r].min * sum_b);
          acc[r][m] = v;
        }
      }
    }
  }
  if constexpr (S > 1)
    store_block<R, M, S, false>(p, acc, warp, lane);
  else
    store_rows<R, M>(p, acc, row0, lane);
}

template <int M, QuantFormat F, int U, int S>
cudaError_t launch_split(const QuantGemvParams &p, cudaStream_t stream) {
  using Layout = SplitLayout<S, false>;
  constexpr int rows_per_block = Layout::kSlots * kRowsPerWarp<M>;
  const dim3 grid((p.w.n + rows_per_block - 1) / rows_per_block);
  return launch_kernel(quant_gemv_k_kernel<M, F, U, S>, grid, dim3(Layout::kThreads), 0, stream, p);
}

template <int M, QuantFormat F, int U>
cudaError_t launch_slices(const QuantGemvParams &p, int split, cudaStream_t stream) {
  return for_split(split, [&](auto slices) {
    return launch_split<M, F, U, decltype(slices)::value>(p, stream);
  });
}

template <int M, QuantFormat F>
cudaError_t launch_gemv(const QuantGemvParams &p, cudaStream_t stream) {
  const int split = quant_gemv_split(F, p.w.n, p.w.k);
  if constexpr (M == 1) {
    // Q6_K (three 16-byte pieces a lane) gains from a second step in flight;
    // Q4_K and Q5_K were slower with it (the commit has the timings). A
    // matrix summed in slices takes these whatever VEGAS_CUDA_QUANT_UNROLL says.
    constexpr int kSteps = F == QuantFormat::kQ6_K ? 2 : 1;
    if (split > 1) return launch_slices<M, F, kSteps>(p, split, stream);
    return for_one_two_four(single_row_unroll(kSteps), [&](auto steps) {
      return launch_split<M, F, decltype(steps)::value, 1>(p, stream);
    });
  }
  return launch_slices<M, F, 1>(p, split, stream);
}

template <QuantFormat F>
cudaError_t launch_gemv_rows(const QuantGemvParams &p, cudaStream_t stream) {
  return for_input_rows(p.m, [&](auto m) { return launch_gemv<decltype(m)::value, F>(p, stream); });
}

// One thread per lane-run pair (32 values), as the GEMV decodes them; each
// value rounded once in f32 (the products are exact), then to bf16.
template <QuantFormat F>
__global__ void quant_dequantize_k_kernel(QuantDequantizeParams p) {
  pdl_enter();
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int blocks = p.w.k / kQuantSuperBlock;
  const int64_t b = g / kLanesPerBlock;  // super-block, row-major
  if (b >= static_cast<int64_t>(p.w.n) * blocks) return;
  const int t = static_cast<int>(g % kLanesPerBlock);
  KRun runs[2];
  k_lane<F>(p.w.qs + b * quant_super_block_bytes(F), k_d6<F>(p.w, b), t, runs[0], runs[1]);
  const int64_t row = b / blocks;
  bf16 *out = p.out + row * p.w.k + (b % blocks) * kQuantSuperBlock + run_a_offset<F>(t);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const KRun &r = runs[h];
    uint32_t packed[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      float v[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = 2 * i + e;
        const float q = magic_byte(r.q[j / 4], j % 4) - (8388608.0f + kQuantOffset<F>);
        v[e] = __fsub_rn(__fmul_rn(r.scale, q), r.min);
      }
      const __nv_bfloat162 pair = __floats2bfloat162_rn(v[0], v[1]);
      packed[i] = *reinterpret_cast<const uint32_t *>(&pair);
    }
    uint4 *dst = reinterpret_cast<uint4 *>(out + h * kRunBDistance<F>);
    dst[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    dst[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  }
}

// One thread per super-block.
__global__ void set_scales_kernel(QuantMatrix w, float d, float dmin) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= static_cast<int64_t>(w.n) * (w.k / kQuantSuperBlock)) return;
  if (w.format == QuantFormat::kQ4_K || w.format == QuantFormat::kQ5_K) {
    __half *head = reinterpret_cast<__half *>(const_cast<uint8_t *>(w.qs) +
                                              b * quant_super_block_bytes(w.format));
    head[0] = __float2half(d);
    head[1] = __float2half(dmin);
  } else {
    const_cast<f16 *>(w.scales)[b] = __float2half(d);
  }
}

}  // namespace

cudaError_t quant_gemv_k(const QuantGemvParams &p, cudaStream_t stream) {
  switch (p.w.format) {
    case QuantFormat::kQ4_K:
      return launch_gemv_rows<QuantFormat::kQ4_K>(p, stream);
    case QuantFormat::kQ5_K:
      return launch_gemv_rows<QuantFormat::kQ5_K>(p, stream);
    default:
      return launch_gemv_rows<QuantFormat::kQ6_K>(p, stream);
  }
}

cudaError_t quant_dequantize_k(const QuantDequantizeParams &p, cudaStream_t stream) {
  if (p.w.k <= 0 || p.w.k % kQuantSuperBlock != 0 || p.w.n <= 0 || p.out == nullptr ||
      p.w.qs == nullptr || (p.w.format == QuantFormat::kQ6_K && p.w.scales == nullptr))
    return cudaErrorInvalidValue;
  const int64_t threads = static_cast<int64_t>(p.w.n) * (p.w.k / kQuantSuperBlock) * kLanesPerBlock;
  const dim3 grid(static_cast<unsigned>((threads + 255) / 256));
  switch (p.w.format) {
    case QuantFormat::kQ4_K:
      return launch_kernel(quant_dequantize_k_kernel<QuantFormat::kQ4_K>, grid, dim3(256), 0,
                           stream, p);
    case QuantFormat::kQ5_K:
      return launch_kernel(quant_dequantize_k_kernel<QuantFormat::kQ5_K>, grid, dim3(256), 0,
                           stream, p);
    default:
      return launch_kernel(quant_dequantize_k_kernel<QuantFormat::kQ6_K>, grid, dim3(256), 0,
                           stream, p);
  }
}

cudaError_t quant_set_super_block_scales(const QuantMatrix &w, float d, float dmin,
                                         cudaStream_t stream) {
  if (!quant_is_k(w.format) || w.k % kQuantSuperBlock != 0 || w.n <= 0 || w.qs == nullptr)
    return cudaErrorInvalidValue;
  const int64_t blocks = static_cast<int64_t>(w.n) * (w.k / kQuantSuperBlock);
  set_scales_kernel<<<static_cast<unsigned>((blocks + 255) / 256), 256, 0, stream>>>(w, d, dmin);
  return cudaGetLastError();
}

}  // namespace vegas::kernels
