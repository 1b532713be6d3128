// quant_gemv_mma (quant_gemv.cuh): matrices of every format quant_gemv takes
// (F8, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) times 1-8 bf16 rows on the tensor cores,
// 1-32 for every format but F8.
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
// A row's sum is the same bits whatever the number of input rows: the
// columns of an MMA do not mix, and the order of every addition is fixed.
// Up to 32 input rows (but F8) take two or four n tiles of 8 (NT): a lane's
// codes become A fragments once and feed one MMA a tile.
// With the SwiGLU epilogue a block's 16 rows are 8 rows of the gate and the
// same 8 of up, so that the block writes their silu(gate) * up.
//
// Q8_0 (one f16 scale per 32 values) takes the same blocks, warps and
// 128-value groups, but an MMA's 16 k values must share a scale: a lane
// reads 8 codes of each row at k offset 8 t of a 32-value block, mma j takes
// its values 4j .. 4j + 3, and each block's two MMAs are scaled by its scale.
// An int8 code becomes a bf16 exactly (|q| <= 128). Q4_0 alike, a lane's 4
// bytes at 4 t of a 16-byte block giving two MMAs (low nibbles: values 0-15,
// high: 16-31), each value q - 8.
//
// Q4_K (256-value super-blocks of eight 32-value sub-blocks, each value
// d sc_j q - dmin m_j with q a nibble) the same way, a loop trip a
// super-block: a lane reads 8 bytes at 8 t of each 32-byte chunk, whose low
// nibbles are 8 values of sub-block 2c and high nibbles 8 of sub-block 2c + 1,
// and the block's 16-byte head (d, dmin, the 6-bit sc and m). Per sub-block
// two MMAs take the nibbles (exact bf16) and two more an A of ones, which
// leaves each input column's sum of x in the same fragment layout, so the
// outputs add d sc_j sum(q x) - dmin m_j sum(x). Q5_K adds each value's
// fifth bit from its qh byte (bit j for sub-block j).
//
// Q6_K (16-value sub-blocks, each value d sc_s (q - 32), q 6 bits from ql's
// nibbles and qh's 2-bit fields) takes half a super-block a loop trip: per
// sub-block each lane reads its 4 values at 4 t (ql and qh words) and one
// MMA takes them, scaled by d sc_s.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <type_traits>

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

// Bytes i and i + 1 of four int8 codes u (each xor 0x80: q + 128) as a bf16
// pair, exactly.
__device__ __forceinline__ uint32_t int8x2_to_bf16x2(uint32_t u, int i) {
  return pack_bf16(quant_lanes::magic_byte(u, i) - 8388736.0f,  // 2^23 + 128
                   quant_lanes::magic_byte(u, i + 1) - 8388736.0f);
}

// Two MMAs over a lane's 8 values of a 32-value run: bf16 pairs lo[i] of
// row g and hi[i] of row g + 8 (values 2i, 2i + 1), the lane's 8 input values
// x (bf16 pairs in the same order); mma j takes values 4j .. 4j + 3.
__device__ __forceinline__ void mma_run(const uint32_t (&lo)[4], const uint32_t (&hi)[4],
                                        const uint4 &x, float (&sum)[4]) {
  const uint32_t xs[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const uint32_t a[4] = {lo[2 * j], hi[2 * j], lo[2 * j + 1], hi[2 * j + 1]};
    mma_bf16(sum, a, xs[2 * j], xs[2 * j + 1]);
  }
}

// One Q8_0 block's codes of row g (lo) and of row g + 8 (hi) as mma_run's
// bf16 pairs.
__device__ __forceinline__ void q8_block_fragments(const uint2 &lo, const uint2 &hi,
                                                   uint32_t (&a_lo)[4], uint32_t (&a_hi)[4]) {
  const uint32_t l[2] = {lo.x ^ 0x80808080u, lo.y ^ 0x80808080u};
  const uint32_t h[2] = {hi.x ^ 0x80808080u, hi.y ^ 0x80808080u};
  a_lo[0] = int8x2_to_bf16x2(l[0], 0);
  a_lo[1] = int8x2_to_bf16x2(l[0], 2);
  a_lo[2] = int8x2_to_bf16x2(l[1], 0);
  a_lo[3] = int8x2_to_bf16x2(l[1], 2);
  a_hi[0] = int8x2_to_bf16x2(h[0], 0);
  a_hi[1] = int8x2_to_bf16x2(h[0], 2);
  a_hi[2] = int8x2_to_bf16x2(h[1], 0);
  a_hi[3] = int8x2_to_bf16x2(h[1], 2);
}

// Four small integers, one a byte (0..127), less kOffset as two bf16 pairs,
// exactly: each byte under 0x43 reads as 128 + q, less 128 + kOffset.
template <int kOffset>
__device__ __forceinline__ void bytes_to_bf16x2(uint32_t q, uint32_t &p01, uint32_t &p23) {
  constexpr float kMagic = 128.0f + kOffset;
  const __nv_bfloat162 offset = __floats2bfloat162_rn(kMagic, kMagic);
  const uint32_t a = __byte_perm(q, 0x43434343u, 0x5140), b = __byte_perm(q, 0x43434343u, 0x5342);
  const __nv_bfloat162 ra = __hsub2(*reinterpret_cast<const __nv_bfloat162 *>(&a), offset);
  const __nv_bfloat162 rb = __hsub2(*reinterpret_cast<const __nv_bfloat162 *>(&b), offset);
  p01 = *reinterpret_cast<const uint32_t *>(&ra);
  p23 = *reinterpret_cast<const uint32_t *>(&rb);
}

// A lane's 8 nibbles of one run (the low or high halves of 8 bytes) as bf16
// pairs; with high (Q5_K), each value's fifth bit from bit 0 of its byte.
__device__ __forceinline__ void run_of_nibbles(const uint2 &bytes, int shift, uint32_t (&pairs)[4],
                                               const uint2 &high = make_uint2(0, 0)) {
  bytes_to_bf16x2<0>(((bytes.x >> shift) & 0x0f0f0f0fu) | ((high.x & 0x01010101u) << 4), pairs[0],
                     pairs[1]);
  bytes_to_bf16x2<0>(((bytes.y >> shift) & 0x0f0f0f0fu) | ((high.y & 0x01010101u) << 4), pairs[2],
                     pairs[3]);
}

// k values a loop trip covers: F8's scale group, four Q8_0 blocks, a Q4_K
// super-block, half a Q6_K super-block; a warp's slice of k holds whole
// super-blocks.
template <QuantFormat F>
constexpr bool kHeadScales = F == QuantFormat::kQ4_K || F == QuantFormat::kQ5_K;  // 6-bit sc, m
template <QuantFormat F>
constexpr int kGroupValues = kHeadScales<F> ? kQuantSuperBlock : 128;
template <QuantFormat F>
constexpr bool kSuperBlocks = kHeadScales<F> || F == QuantFormat::kQ6_K;
template <QuantFormat F>
constexpr int kSliceValues = kSuperBlocks<F> ? kQuantSuperBlock : 128;
template <QuantFormat F>
constexpr int kSuperBlockBytes = F == QuantFormat::kQ4_K   ? 144
                                 : F == QuantFormat::kQ5_K ? 176
                                                           : 208;  // quant_super_block_bytes

// One 128-value group of a lane: codes of rows g and g + 8 and their scales
// (F8: two 64-value steps, one f32 scale a row; Q8_0: four 32-value blocks,
// their four f16 scales a row in 8 bytes).
template <QuantFormat F>
struct Group;
template <>
struct Group<QuantFormat::kF8> {
  uint4 lo[2], hi[2];
  float scale_lo, scale_hi;
};
// Q8_0, Q4_0: a loop trip's four 32-value blocks, their f16 scales 8 bytes a row.
template <>
struct Group<QuantFormat::kQ8_0> {
  uint2 lo[4], hi[4];
  uint2 scales_lo, scales_hi;
};
template <>
struct Group<QuantFormat::kQ4_0> {
  uint32_t lo[4], hi[4];  // 4 bytes at 4 t of each 16-byte block: values 4t.. and 16 + 4t..
  uint2 scales_lo, scales_hi;
};
// Block b's scales of rows g and g + 8 as floats (Q8_0, Q4_0).
template <class G>
__device__ __forceinline__ float2 block_scales(const G &c, int b) {
  return make_float2(__half2float(reinterpret_cast<const f16 *>(&c.scales_lo)[b]),
                     __half2float(reinterpret_cast<const f16 *>(&c.scales_hi)[b]));
}
template <>
struct Group<QuantFormat::kQ4_K> {
  uint4 head_lo, head_hi;  // d, dmin, 12 bytes of sub-block scales and mins
  uint2 lo[4], hi[4];      // 8 bytes of each 32-byte chunk of nibbles
};
template <>
struct Group<QuantFormat::kQ5_K> : Group<QuantFormat::kQ4_K> {
  uint2 qh_lo, qh_hi;  // qh[8 t .. 8 t + 7]: bit j the fifth bit of value 8 t + i of sub-block j
};
// Half h of a Q6_K super-block (128 values, eight 16-value sub-blocks s; a
// lane's 4 values of each at 4 t): ql words at 64 h + 16 m + 4 t (m = s % 4,
// nibble s / 4) and qh words at 128 + 32 h + 16 m2 + 4 t (m2 = s % 2, bits
// 2 (s / 2)) of each row, the half's 8 int8 scales and the block's d.
template <>
struct Group<QuantFormat::kQ6_K> {
  uint32_t ql_lo[4], ql_hi[4], qh_lo[2], qh_hi[2];
  uint2 sc_lo, sc_hi;
  f16 d_lo, d_hi;
};

// Where a lane's codes of a row start in each 64-value step (F8), 32-value
// block (Q8_0), and its input values in each 32-value run (Q8_0, Q4_K) or
// 16-value sub-block (Q6_K).
template <QuantFormat F>
constexpr int kLaneValues = F == QuantFormat::kF8     ? 16
                            : F == QuantFormat::kQ4_0 ? 4
                            : F == QuantFormat::kQ6_K ? 4
                                                      : 8;

// The outputs of a tile (quant_gemv_mma_kernel's end): output i = (row r,
// input row m) adds its warps' sums in warp order.
template <int S, int NT>
__device__ __forceinline__ void store_tile(const QuantGemvParams &p,
                                           const float4 (&partial)[S][NT][32], int row0) {
  const int n = p.w.n;
  for (int i = threadIdx.x; i < kTileRows * 8 * NT; i += S * 32) {
    // m's column in its n tile: c (NT a power of two: shifts, as for one tile)
    const int r = i >> (3 + NT / 2), m = i & (8 * NT - 1), c = m & 7;
    if (m >= p.m || row0 + r >= n) continue;
    const int src = (r & 7) * 4 + (c >> 1), part = (r >> 3) * 2 + (c & 1);
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < S; ++w)
      v += reinterpret_cast<const float *>(&partial[w][m >> 3][src])[part];
    quant_lanes::store_output(p, static_cast<int64_t>(m) * quant_lanes::output_stride(p) + row0 + r,
                              v);
  }
}

// The SwiGLU outputs of a tile (8 rows of the gate, then the same rows of
// up; quant_gemv_mma_kernel's end): output i = (row j, input row m) adds
// its warps' sums of gate row j and up row j in warp order, as store_tile
// adds those of each row.
template <int S, int NT>
__device__ __forceinline__ void store_swiglu_tile(const QuantGemvParams &p,
                                                  const float4 (&partial)[S][NT][32], int row0) {
  for (int i = threadIdx.x; i < kTileRows / 2 * 8 * NT; i += S * 32) {
    const int j = i >> (3 + NT / 2), m = i & (8 * NT - 1), c = m & 7;
    if (m >= p.m || row0 + j >= p.w.n) continue;
    const int src = j * 4 + (c >> 1);
    float gate = 0.0f, up = 0.0f;
#pragma unroll
    for (int w = 0; w < S; ++w) {
      const float *part = reinterpret_cast<const float *>(&partial[w][m >> 3][src]);
      gate += part[c & 1];
      up += part[2 + (c & 1)];
    }
    quant_lanes::store_swiglu(p, static_cast<int64_t>(m) * quant_lanes::output_stride(p) + row0 + j,
                              gate, up);
  }
}

// A Q4_K or Q5_K loop trip's loads: the heads of the super-block `group` of
// the two rows (first super-blocks of the slice at lo and hi), the lane's 8
// bytes of each 32-byte chunk of nibbles, and Q5_K's 8 bytes of fifth bits.
template <QuantFormat F>
__device__ __forceinline__ void load_k(const uint8_t *lo, const uint8_t *hi, int group, int t,
                                       Group<F> &c) {
  constexpr int kNibbles = F == QuantFormat::kQ5_K ? 48 : 16;  // after the head (and qh)
  const uint8_t *bl = lo + int64_t{group} * kSuperBlockBytes<F>;
  const uint8_t *bh = hi + int64_t{group} * kSuperBlockBytes<F>;
  c.head_lo = __ldg(reinterpret_cast<const uint4 *>(bl));
  c.head_hi = __ldg(reinterpret_cast<const uint4 *>(bh));
#pragma unroll
  for (int chunk = 0; chunk < 4; ++chunk) {
    const int at = kNibbles + 32 * chunk + 8 * t;
    c.lo[chunk] = __ldg(reinterpret_cast<const uint2 *>(bl + at));
    c.hi[chunk] = __ldg(reinterpret_cast<const uint2 *>(bh + at));
  }
  if constexpr (F == QuantFormat::kQ5_K) {
    c.qh_lo = __ldg(reinterpret_cast<const uint2 *>(bl + 16 + 8 * t));
    c.qh_hi = __ldg(reinterpret_cast<const uint2 *>(bh + 16 + 8 * t));
  }
}

// A Q6_K loop trip's loads (Group<kQ6_K>): half group % 2 of super-block
// group / 2 of the rows at lo and hi (the slice's first super-blocks), whose
// d are d_lo / d_hi[group / 2].
__device__ __forceinline__ void load_q6k(const uint8_t *lo, const uint8_t *hi, const f16 *d_lo,
                                         const f16 *d_hi, int group, int t,
                                         Group<QuantFormat::kQ6_K> &c) {
  constexpr int kBytes = kSuperBlockBytes<QuantFormat::kQ6_K>;
  const int block = group >> 1, h = group & 1;
  const uint8_t *bl = lo + int64_t{block} * kBytes, *bh = hi + int64_t{block} * kBytes;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const int at = 64 * h + 16 * m + 4 * t;
    c.ql_lo[m] = __ldg(reinterpret_cast<const uint32_t *>(bl + at));
    c.ql_hi[m] = __ldg(reinterpret_cast<const uint32_t *>(bh + at));
  }
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const int at = 128 + 32 * h + 16 * m + 4 * t;
    c.qh_lo[m] = __ldg(reinterpret_cast<const uint32_t *>(bl + at));
    c.qh_hi[m] = __ldg(reinterpret_cast<const uint32_t *>(bh + at));
  }
  c.sc_lo = __ldg(reinterpret_cast<const uint2 *>(bl + 192 + 8 * h));
  c.sc_hi = __ldg(reinterpret_cast<const uint2 *>(bh + 192 + 8 * h));
  c.d_lo = __ldg(d_lo + block);
  c.d_hi = __ldg(d_hi + block);
}

// The lane's input values of a run (8 at x + at; zeros for a column past the
// input rows).
__device__ __forceinline__ uint4 input_run(const bf16 *x, int at, bool has_x) {
  return has_x ? __ldg(reinterpret_cast<const uint4 *>(x + at)) : make_uint4(0, 0, 0, 0);
}

// acc += sum (rows g: 0, 1 and g + 8: 2, 3; columns 2t, 2t + 1) times each
// row's scale.
__device__ __forceinline__ void add_scaled(float (&acc)[4], const float (&sum)[4], float scale_lo,
                                           float scale_hi) {
  acc[0] = fmaf(sum[0], scale_lo, acc[0]);
  acc[1] = fmaf(sum[1], scale_lo, acc[1]);
  acc[2] = fmaf(sum[2], scale_hi, acc[2]);
  acc[3] = fmaf(sum[3], scale_hi, acc[3]);
}

// acc[j] += one loop trip's products of n tile j (input rows 8 j ..), for
// every format but F8, whose are in the kernel; x[j] is the lane's input
// column of tile j at the slice's start (has_x: a row of the launch). The
// codes become A fragments once for all the tiles.
template <int NT>
__device__ __forceinline__ void accumulate(const Group<QuantFormat::kQ8_0> &c,
                                           const bf16 *const (&x)[NT], int group,
                                           const bool (&has_x)[NT], float (&acc)[NT][4]) {
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    uint4 xb[NT];  // each tile's inputs first, then the fragments once
#pragma unroll
    for (int j = 0; j < NT; ++j)
      xb[j] = input_run(x[j], group * kGroupValues<QuantFormat::kQ8_0> + b * kQuantBlock, has_x[j]);
    float sum[NT][4] = {};
    uint32_t a_lo[4], a_hi[4];
    q8_block_fragments(c.lo[b], c.hi[b], a_lo, a_hi);
#pragma unroll
    for (int j = 0; j < NT; ++j) mma_run(a_lo, a_hi, xb[j], sum[j]);
    const float2 d = block_scales(c, b);
#pragma unroll
    for (int j = 0; j < NT; ++j) add_scaled(acc[j], sum[j], d.x, d.y);
  }
}

template <int NT>
__device__ __forceinline__ void accumulate(const Group<QuantFormat::kQ4_0> &c,
                                           const bf16 *const (&x)[NT], int group,
                                           const bool (&has_x)[NT], float (&acc)[NT][4]) {
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    float sum[NT][4] = {};
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // low nibbles: values 0-15; high: 16-31
      const int shift = 4 * half;
      uint2 xr[NT];
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const bf16 *xs =
            x[j] + group * kGroupValues<QuantFormat::kQ4_0> + b * kQuantBlock + 16 * half;
        xr[j] = has_x[j] ? __ldg(reinterpret_cast<const uint2 *>(xs)) : make_uint2(0, 0);
      }
      uint32_t a[4];
      bytes_to_bf16x2<8>((c.lo[b] >> shift) & 0x0f0f0f0fu, a[0], a[2]);
      bytes_to_bf16x2<8>((c.hi[b] >> shift) & 0x0f0f0f0fu, a[1], a[3]);
#pragma unroll
      for (int j = 0; j < NT; ++j) mma_bf16(sum[j], a, xr[j].x, xr[j].y);
    }
    const float2 d = block_scales(c, b);
#pragma unroll
    for (int j = 0; j < NT; ++j) add_scaled(acc[j], sum[j], d.x, d.y);
  }
}

template <QuantFormat F, int NT, std::enable_if_t<kHeadScales<F>, int> = 0>
__device__ __forceinline__ void accumulate(const Group<F> &c, const bf16 *const (&x)[NT], int group,
                                           const bool (&has_x)[NT], float (&acc)[NT][4]) {
  using quant_lanes::half_bits;
  using quant_lanes::scale_min;
  constexpr uint32_t kOnes = 0x3f803f80u;  // bf16 1.0 twice
  const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
  const float d_lo = half_bits(c.head_lo.x & 0xffffu), dmin_lo = half_bits(c.head_lo.x >> 16);
  const float d_hi = half_bits(c.head_hi.x & 0xffffu), dmin_hi = half_bits(c.head_hi.x >> 16);
#pragma unroll
  for (int chunk = 0; chunk < 4; ++chunk)
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // sub-block 2 chunk + half: low or high nibbles
      const int sb = 2 * chunk + half;
      uint4 xr[NT];
#pragma unroll
      for (int j = 0; j < NT; ++j)
        xr[j] = input_run(x[j], group * kQuantSuperBlock + 32 * sb, has_x[j]);
      uint32_t q_lo[4], q_hi[4];
      if constexpr (F == QuantFormat::kQ5_K) {
        run_of_nibbles(c.lo[chunk], 4 * half, q_lo, make_uint2(c.qh_lo.x >> sb, c.qh_lo.y >> sb));
        run_of_nibbles(c.hi[chunk], 4 * half, q_hi, make_uint2(c.qh_hi.x >> sb, c.qh_hi.y >> sb));
      } else {
        run_of_nibbles(c.lo[chunk], 4 * half, q_lo);
        run_of_nibbles(c.hi[chunk], 4 * half, q_hi);
      }
      float sum_q[NT][4] = {}, sum_x[NT][4] = {};
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        mma_run(q_lo, q_hi, xr[j], sum_q[j]);
        mma_run(ones, ones, xr[j], sum_x[j]);
      }
      float sc_lo, m_lo, sc_hi, m_hi;
      scale_min(c.head_lo, sb, sc_lo, m_lo);
      scale_min(c.head_hi, sb, sc_hi, m_hi);
      const float a_lo = d_lo * sc_lo, b_lo = dmin_lo * m_lo;
      const float a_hi = d_hi * sc_hi, b_hi = dmin_hi * m_hi;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        acc[j][0] = fmaf(a_lo, sum_q[j][0], fmaf(-b_lo, sum_x[j][0], acc[j][0]));
        acc[j][1] = fmaf(a_lo, sum_q[j][1], fmaf(-b_lo, sum_x[j][1], acc[j][1]));
        acc[j][2] = fmaf(a_hi, sum_q[j][2], fmaf(-b_hi, sum_x[j][2], acc[j][2]));
        acc[j][3] = fmaf(a_hi, sum_q[j][3], fmaf(-b_hi, sum_x[j][3], acc[j][3]));
      }
    }
}

// The 6-bit values (q, before less 32) of a lane's 4 values of sub-block s.
__device__ __forceinline__ uint32_t q6_bytes(const uint32_t (&ql)[4], const uint32_t (&qh)[2],
                                             int s) {
  return ((ql[s & 3] >> (4 * (s >> 2))) & 0x0f0f0f0fu) |
         (((qh[s & 1] >> (2 * (s >> 1))) & 0x03030303u) << 4);
}

// Int8 scale s (0..7) of 8 in a uint2, as a float.
__device__ __forceinline__ float int8_of(const uint2 &v, int s) {
  const uint32_t w = s < 4 ? v.x : v.y;
  return static_cast<float>(static_cast<int8_t>((w >> (8 * (s & 3))) & 0xffu));
}

template <int NT>
__device__ __forceinline__ void accumulate(const Group<QuantFormat::kQ6_K> &c,
                                           const bf16 *const (&x)[NT], int group,
                                           const bool (&has_x)[NT], float (&acc)[NT][4]) {
  const float d_lo = __half2float(c.d_lo), d_hi = __half2float(c.d_hi);
#pragma unroll
  for (int s = 0; s < 8; ++s) {  // sub-block s of the half: one MMA a tile, one scale a row
    uint2 xs[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j)
      xs[j] = has_x[j] ? __ldg(reinterpret_cast<const uint2 *>(x[j] + group * 128 + 16 * s))
                       : make_uint2(0, 0);
    uint32_t a[4];
    bytes_to_bf16x2<32>(q6_bytes(c.ql_lo, c.qh_lo, s), a[0], a[2]);
    bytes_to_bf16x2<32>(q6_bytes(c.ql_hi, c.qh_hi, s), a[1], a[3]);
    float sum[NT][4] = {};
#pragma unroll
    for (int j = 0; j < NT; ++j) mma_bf16(sum[j], a, xs[j].x, xs[j].y);
#pragma unroll
    for (int j = 0; j < NT; ++j)
      add_scaled(acc[j], sum[j], d_lo * int8_of(c.sc_lo, s), d_hi * int8_of(c.sc_hi, s));
  }
}

// kSwiglu (QuantGemvParams::swiglu_up): the tile's rows 0-7 are 8 rows of
// the gate, rows 8-15 the same rows of up. NT n tiles of 8 input rows each
// (F8: one).
template <QuantFormat F, int S, bool kSwiglu, int NT = 1>
__global__ void __launch_bounds__(S * 32) quant_gemv_mma_kernel(QuantGemvParams p) {
  constexpr bool kF8 = F == QuantFormat::kF8, kHeadK = kHeadScales<F>;
  constexpr bool kQ6K = F == QuantFormat::kQ6_K, kQ40 = F == QuantFormat::kQ4_0;
  static_assert(!kF8 || NT == 1, "F8 takes 8 input rows a launch");
  __shared__ float4 partial[S][NT][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int k = p.w.k, n = p.w.n, row0 = blockIdx.x * (kSwiglu ? kTileRows / 2 : kTileRows);
  // Rows past the end read row n - 1 again and store nothing.
  const int64_t r_lo = min(row0 + g, n - 1), r_hi = kSwiglu ? r_lo : min(row0 + g + 8, n - 1);
  const QuantMatrix &hi = kSwiglu ? p.swiglu_up : p.w;
  const int slice = k / S, k0 = warp * slice, groups = slice / kGroupValues<F>;
  // The lane's codes of its rows (Q4_K, Q6_K: the slice's first super-blocks).
  const uint8_t *w_lo, *w_hi;
  if constexpr (kSuperBlocks<F>) {
    const int64_t row_bytes = int64_t{k} / kQuantSuperBlock * kSuperBlockBytes<F>;
    const int64_t first = int64_t{k0} / kQuantSuperBlock * kSuperBlockBytes<F>;
    w_lo = p.w.qs + r_lo * row_bytes + first;
    w_hi = hi.qs + r_hi * row_bytes + first;
  } else if constexpr (kQ40) {  // half a byte a value
    w_lo = p.w.qs + r_lo * (k / 2) + k0 / 2 + 4 * t;
    w_hi = hi.qs + r_hi * (k / 2) + k0 / 2 + 4 * t;
  } else {
    w_lo = p.w.qs + r_lo * k + k0 + kLaneValues<F> * t;
    w_hi = hi.qs + r_hi * k + k0 + kLaneValues<F> * t;
  }
  const float *s_lo = nullptr, *s_hi = nullptr;  // F8: a row's group scales
  const f16 *d_lo = nullptr, *d_hi = nullptr;    // Q8_0, Q4_0, Q6_K: a row's block scales
  if constexpr (kF8) {
    s_lo = p.w.scales_f32 + r_lo * (k / kF8Group) + k0 / kF8Group;
    s_hi = hi.scales_f32 + r_hi * (k / kF8Group) + k0 / kF8Group;
  } else if constexpr (kQ6K) {
    d_lo = p.w.scales + r_lo * (k / kQuantSuperBlock) + k0 / kQuantSuperBlock;
    d_hi = hi.scales + r_hi * (k / kQuantSuperBlock) + k0 / kQuantSuperBlock;
  } else if constexpr (!kHeadK) {
    d_lo = p.w.scales + r_lo * (k / kQuantBlock) + k0 / kQuantBlock;
    d_hi = hi.scales + r_hi * (k / kQuantBlock) + k0 / kQuantBlock;
  }
  // Column g of n tile j: input row 8 j + g, or zeros.
  bool has_x[NT];
  const bf16 *x[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    has_x[j] = 8 * j + g < p.m;
    x[j] = p.x + static_cast<int64_t>(has_x[j] ? 8 * j + g : 0) * k + k0 + kLaneValues<F> * t;
  }
  auto load = [&](int group, Group<F> &c) {
    if constexpr (kF8) {
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const int at = group * kF8Group + s * kStep;
        c.lo[s] = __ldg(reinterpret_cast<const uint4 *>(w_lo + at));
        c.hi[s] = __ldg(reinterpret_cast<const uint4 *>(w_hi + at));
      }
      c.scale_lo = __ldg(s_lo + group);
      c.scale_hi = __ldg(s_hi + group);
    } else if constexpr (kHeadK) {
      load_k<F>(w_lo, w_hi, group, t, c);
    } else if constexpr (kQ6K) {
      load_q6k(w_lo, w_hi, d_lo, d_hi, group, t, c);
    } else {  // Q8_0 (a byte a value), Q4_0 (half a byte)
      using Codes = std::remove_reference_t<decltype(c.lo[0])>;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int at = (group * kGroupValues<F> + b * kQuantBlock) / (kQ40 ? 2 : 1);
        c.lo[b] = __ldg(reinterpret_cast<const Codes *>(w_lo + at));
        c.hi[b] = __ldg(reinterpret_cast<const Codes *>(w_hi + at));
      }
      c.scales_lo = __ldg(reinterpret_cast<const uint2 *>(d_lo + group * 4));
      c.scales_hi = __ldg(reinterpret_cast<const uint2 *>(d_hi + group * 4));
    }
  };
  // The weights do not depend on the previous kernel: the first group's are
  // requested before the PDL wait.
  Group<F> cur;
  load(0, cur);
  pdl_enter();
  float acc[NT][4] = {};
  for (int group = 0; group < groups; ++group) {
    Group<F> next;
    if (group + 1 < groups) load(group + 1, next);
    if constexpr (kF8) {
      float sum[4] = {};
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        uint4 xa = make_uint4(0, 0, 0, 0), xb = xa;
        if (has_x[0]) {
          const uint4 *xs = reinterpret_cast<const uint4 *>(x[0] + group * kF8Group + s * kStep);
          xa = __ldg(xs);
          xb = __ldg(xs + 1);
        }
        mma_step(cur.lo[s], cur.hi[s], xa, xb, sum);
      }
      // sum: rows g (0, 1) and g + 8 (2, 3), columns 2t and 2t + 1.
      acc[0][0] = fmaf(sum[0], cur.scale_lo, acc[0][0]);
      acc[0][1] = fmaf(sum[1], cur.scale_lo, acc[0][1]);
      acc[0][2] = fmaf(sum[2], cur.scale_hi, acc[0][2]);
      acc[0][3] = fmaf(sum[3], cur.scale_hi, acc[0][3]);
    } else if constexpr (kHeadK) {
      accumulate<F, NT>(cur, x, group, has_x, acc);
    } else {
      accumulate<NT>(cur, x, group, has_x, acc);
    }
    cur = next;
  }
#pragma unroll
  for (int j = 0; j < NT; ++j)
    partial[warp][j][lane] = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
  __syncthreads();
  if constexpr (kSwiglu)
    store_swiglu_tile<S, NT>(p, partial, row0);
  else
    store_tile<S, NT>(p, partial, row0);
}

template <QuantFormat F>
cudaError_t launch_mma(const QuantGemvParams &p, int split, cudaStream_t stream) {
  // Each warp's slice whole loop trips: 4 warps always fit, k being a
  // multiple of quant_gemv_k_align's 512 (1,024 for Q4_K; quant_gemv checked it).
  while (split > 4 && p.w.k % (split * kSliceValues<F>) != 0) split /= 2;
  const bool swiglu = p.swiglu_up.qs != nullptr;
  const int tile = swiglu ? kTileRows / 2 : kTileRows;
  const dim3 grid((p.w.n + tile - 1) / tile);
  // The K formats have no SwiGLU epilogue (quant_gemv_swiglu_supports): no fused kernel.
  constexpr bool kFuses = !kSuperBlocks<F>;
  auto launch = [&](auto plain, auto fused, int warps) {
    return launch_kernel(swiglu ? fused : plain, grid, dim3(warps * 32), 0, stream, p);
  };
  if constexpr (F != QuantFormat::kF8) {
    // 9-32 input rows: two or four n tiles, 8 warps (4 where k asks it).
    if (p.m > 2 * 8) {
      if (split >= 8)
        return launch(quant_gemv_mma_kernel<F, 8, false, 4>, quant_gemv_mma_kernel<F, 8, kFuses, 4>,
                      8);
      return launch(quant_gemv_mma_kernel<F, 4, false, 4>, quant_gemv_mma_kernel<F, 4, kFuses, 4>,
                    4);
    }
    if (p.m > 8) {
      if (split >= 8)
        return launch(quant_gemv_mma_kernel<F, 8, false, 2>, quant_gemv_mma_kernel<F, 8, kFuses, 2>,
                      8);
      return launch(quant_gemv_mma_kernel<F, 4, false, 2>, quant_gemv_mma_kernel<F, 4, kFuses, 2>,
                    4);
    }
  }
  switch (split) {
    case 16:
      return launch(quant_gemv_mma_kernel<F, 16, false>, quant_gemv_mma_kernel<F, 16, kFuses>, 16);
    case 8:
      return launch(quant_gemv_mma_kernel<F, 8, false>, quant_gemv_mma_kernel<F, 8, kFuses>, 8);
    default:
      return launch(quant_gemv_mma_kernel<F, 4, false>, quant_gemv_mma_kernel<F, 4, kFuses>, 4);
  }
}

}  // namespace

bool quant_gemv_mma_supports(QuantFormat f) {
  return f == QuantFormat::kF8 || f == QuantFormat::kQ8_0 || f == QuantFormat::kQ4_0 ||
         quant_is_k(f);
}

int quant_gemv_mma_max_rows(QuantFormat f) {
  return f == QuantFormat::kF8 ? kQuantGemvMaxRows : kQuantGemvMmaMaxRows;
}

cudaError_t quant_gemv_mma(const QuantGemvParams &p, int split, cudaStream_t stream) {
  if (p.m < 1 || p.m > quant_gemv_mma_max_rows(p.w.format)) return cudaErrorInvalidValue;
  switch (p.w.format) {
    case QuantFormat::kF8:
      return launch_mma<QuantFormat::kF8>(p, split, stream);
    case QuantFormat::kQ8_0:
      return launch_mma<QuantFormat::kQ8_0>(p, split, stream);
    case QuantFormat::kQ4_0:
      return launch_mma<QuantFormat::kQ4_0>(p, split, stream);
    case QuantFormat::kQ4_K:
      return launch_mma<QuantFormat::kQ4_K>(p, split, stream);
    case QuantFormat::kQ5_K:
      return launch_mma<QuantFormat::kQ5_K>(p, split, stream);
    case QuantFormat::kQ6_K:
      return launch_mma<QuantFormat::kQ6_K>(p, split, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace vegas::kernels
