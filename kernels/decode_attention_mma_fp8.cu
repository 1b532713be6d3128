// decode_attention_mma for fp8 caches (kv_fp8.cuh). The bf16 kernel's
// structure (each warp streams its own key steps through cp.async stages of
// its own shared memory), with the stages holding the rows as the cache has
// them: each row's HD codes (16-byte chunks swizzled) and its scale. Staged in
// the bf16 kernel's rows and expanded there in place, an fp8 step kept as
// many keys in flight as bf16 for half the bytes and spent as many
// instructions per key, and streamed the cache no faster than bf16. Here a
// step is 32 keys (the per-step work of waits, reductions and softmax
// bookkeeping spread over twice the keys), two stages a warp in the shared
// memory the bf16 kernel's three take. K feeds the score mma straight from
// its codes: the head dimensions are summed in an order (the same for q and
// K, which a dot product does not see) where a lane's B fragment of a
// 16-dimension chunk is four consecutive codes of its key, one 32-bit shared
// load and two conversions. V is expanded to f16 codes by the warp, 16 keys
// at a time, into a tile that ldmatrix reads transposed. Splits, read-ahead
// before the PDL wait, the split merge and the output contract are
// decode_mma_kernel's.
#include <cstdint>

#include "decode_attention.cuh"
#include "decode_common.cuh"
#include "decode_mma_common.cuh"
#include "kv_fp8_stage.cuh"
#include "mma_fragments.cuh"

namespace vegas::kernels {

namespace {

using namespace mma;

constexpr int kWarps = kMmaWarps;
constexpr int kNk = 32;        // keys per warp step
constexpr int kStages = 2;     // per warp: the step computed and one in flight
constexpr int kMinBlocks = 2;  // per multiprocessor: 88 KB of stages each
constexpr float kLog2e = 1.4426950408889634f;

// One warp's shared memory: kStages stages (kv_fp8_stage.cuh), each the
// step's kNk K rows and kNk V rows of HD codes, then their scales; then the V
// tile, one 16-key chunk of V expanded to f16.
template <int HD, int GROUP>
struct Fp8Layout {
  static_assert(HD == 64, "four 16-byte chunks a row, swizzled over four row pairs");
  static constexpr int kRows = 2 * kNk;
  static constexpr int kScalesAt = kRows * HD;
  static constexpr int kStageBytes = kScalesAt + kRows * 4;
  static constexpr int kVStride = HD + 8;  // f16 a row of the V tile: conflict-free ldmatrix
  static constexpr int kWarpBytes = kStages * kStageBytes + 16 * kVStride * 2;
  static constexpr size_t kTileBytes = size_t{kWarps} * kWarpBytes;
  static constexpr size_t kBytes = sizeof(MmaWarpStates<HD, GROUP>) > kTileBytes
                                       ? sizeof(MmaWarpStates<HD, GROUP>)
                                       : kTileBytes;
};

// The A fragments of q for the permuted dimension order: in chunk kc, the
// k-slots 2 t4, 2 t4 + 1 (a[0]) and 2 t4 + 8, 2 t4 + 9 (a[2]) stand for
// dimensions kc * 16 + 4 t4 + {0, 1} and {2, 3}; rows g < GROUP are the
// group's heads, the rest zero. f16, times the softmax scale.
template <int HD, int GROUP>
__device__ __forceinline__ void load_q_permuted(const bf16 *q, float scale, int g, int t4,
                                                uint32_t (&qf)[HD / 16][4]) {
#pragma unroll
  for (int kc = 0; kc < HD / 16; ++kc) {
    uint2 four = make_uint2(0, 0);
    if (g < GROUP) four = *reinterpret_cast<const uint2 *>(q + kc * 16 + 4 * t4);
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&four.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&four.y));
    qf[kc][0] = pack_f16(lo.x * scale, lo.y * scale);
    qf[kc][1] = 0u;  // row g + 8
    qf[kc][2] = pack_f16(hi.x * scale, hi.y * scale);
    qf[kc][3] = 0u;
  }
}

// S = Q K^T for a step's kNk keys (B column g of n-tile n: key row n * 8 + g),
// K straight from its codes in the permuted order of load_q_permuted.
template <int HD>
__device__ __forceinline__ void score_fp8_keys(const unsigned char *stage,
                                               const uint32_t (&qf)[HD / 16][4], int g, int t4,
                                               float (&s)[kNk / 8][4]) {
#pragma unroll
  for (int n = 0; n < kNk / 8; ++n) {
    s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < HD / 16; ++kc) {
      const uint32_t four =
          *reinterpret_cast<const uint32_t *>(stage + chunk_at<HD>(n * 8 + g, kc) + 4 * t4);
      mma_f16(s[n], qf[kc], e4m3_pair_to_f16(four & 0xffffu), e4m3_pair_to_f16(four >> 16));
    }
  }
}

// O += P V for a step: V is expanded a 16-key chunk at a time into vt, each
// weight multiplied by its key's V scale times v_inv (1 / v_unit, the largest
// V scale seen so far, in whose units o is kept: rescaled exactly, powers of
// two, when a larger one comes), so the f16 weights stay in [0, 1]. Lane l
// holds the scales of stage rows l + 32 j in row_scale[j].
template <int HD, int STRIDE>
__device__ __forceinline__ void accumulate_pv_fp8(const unsigned char *stage,
                                                  float (&s)[kNk / 8][4], float (&o)[HD / 8][4],
                                                  bf16 *vt, const float (&row_scale)[kNk / 16],
                                                  float &v_unit, float &v_inv, int lane) {
  float mine = 0.0f;  // this lane's V scales
#pragma unroll
  for (int j = 0; j < kNk / 16; ++j)
    if (lane + 32 * j >= kNk) mine = fmaxf(mine, row_scale[j]);
  raise_v_unit(mine, v_unit, v_inv, [&](float f) { scale_rows<HD>(o, f, f); });
  const int t4 = lane & 3;
#pragma unroll
  for (int c = 0; c < kNk / 16; ++c) {
    if (c > 0) __syncwarp();  // the chunk before is read
    expand_v_rows<HD, STRIDE>(stage, kNk + 16 * c, vt, lane);
    __syncwarp();
    // This thread's keys n * 8 + 2 t4 + {0, 1} of the chunk: stage rows
    // kNk + 16 c + ..., held by lane (kNk + 16 c) % 32 + ... in register (kNk + 16 c) / 32.
    const int j = (kNk + 16 * c) / 32, base = (kNk + 16 * c) % 32;
    float w[2][2];
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e)
        w[n][e] = v_inv * __shfl_sync(0xffffffffu, row_scale[j], base + n * 8 + 2 * t4 + e);
    uint32_t a[4];
    a[0] = pack_f16(s[2 * c][0] * w[0][0], s[2 * c][1] * w[0][1]);
    a[1] = pack_f16(s[2 * c][2] * w[0][0], s[2 * c][3] * w[0][1]);
    a[2] = pack_f16(s[2 * c + 1][0] * w[1][0], s[2 * c + 1][1] * w[1][1]);
    a[3] = pack_f16(s[2 * c + 1][2] * w[1][0], s[2 * c + 1][3] * w[1][1]);
#pragma unroll
    for (int d2 = 0; d2 < HD / 16; ++d2) {
      uint32_t b[4];
      ldmatrix_x4_trans(
          b, vt + (((lane >> 3) & 1) * 8 + (lane & 7)) * STRIDE + d2 * 16 + (lane >> 4) * 8);
      mma_f16(o[2 * d2], a, b[0], b[1]);
      mma_f16(o[2 * d2 + 1], a, b[2], b[3]);
    }
  }
}

template <int HD, int GROUP, bool CLUSTER>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks)
    decode_mma_fp8_kernel(PagedAttentionParams p) {
  using Layout = Fp8Layout<HD, GROUP>;
  constexpr int kPieces = HD / 16;            // 16-code pieces of a row
  constexpr int kRowsPerLoad = 32 / kPieces;  // rows one warp copy covers
  constexpr int kLoads = kNk / kRowsPerLoad;  // copies per lane per step, for K and for V
  static_assert(GROUP <= 8, "the group's heads are rows 0..7 of the m16 tile");
  static_assert(kNk == 16 || kNk == 32, "a lane holds the scales of stage rows lane + 32 j");
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t4 = lane & 3;
  const int row_in = lane / kPieces, piece = lane % kPieces;
  const int seq = blockIdx.x / p.n_kv_heads, kvh = blockIdx.x % p.n_kv_heads;
  unsigned char *stages = smem + warp * Layout::kWarpBytes;
  bf16 *vt = reinterpret_cast<bf16 *>(stages + kStages * Layout::kStageBytes);

  if (!p.read_ahead) pdl_wait();  // else the wait follows the first copies
  DecodeSlice sl;
  if (!decode_slice(p, seq, &sl)) return;  // graph padding: no row
  constexpr int kBlockStep = kWarps * kNk;
  const int first = sl.begin + warp * kNk;  // this warp's steps: first + i * kBlockStep
  const int n_steps = first < sl.end ? (sl.end - first + kBlockStep - 1) / kBlockStep : 0;
  const int own = p.read_ahead ? sl.n_keys - 1 : -1;  // as in decode_mma_kernel
  auto key_of = [&](int i, int r) { return first + i * kBlockStep + r * kRowsPerLoad + row_in; };
  int64_t slots[kLoads];  // looked up one issue ahead, as in decode_mma_kernel
  auto look_up = [&](int i) {
#pragma unroll
    for (int r = 0; r < kLoads; ++r) slots[r] = i < n_steps ? sl.slot(p, key_of(i, r)) : -1;
  };
  // Step i's rows (slots looked up) into its stage; K's scales by the
  // piece-0 lanes, V's by the piece-1 lanes. `skip` (the own key) is left out.
  auto issue = [&](int i, int skip) {
    if (i < n_steps) {
      unsigned char *st = stages + (i % kStages) * Layout::kStageBytes;
#pragma unroll
      for (int r = 0; r < kLoads; ++r) {
        const int row = r * kRowsPerLoad + row_in;
        if (key_of(i, r) == skip) continue;
        const bool valid = slots[r] >= 0;
        const int64_t head = (valid ? slots[r] : 0) * p.n_kv_heads + kvh;
        stage_fp8_piece<HD, kNk, true>(st, row, piece, p.k_cache, p.k_scale, head, valid, 0);
        stage_fp8_piece<HD, kNk, true>(st, kNk + row, piece, p.v_cache, p.v_scale, head, valid, 1);
      }
    }
    cp_async_commit();  // empty past the last step: the group count stays uniform
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    look_up(i);
    issue(i, own);
  }
  look_up(kStages - 1);
  if (p.read_ahead) {
    pdl_wait();
    // The own key, if one of the steps above holds it: plain loads now.
    const int i = (own - first) / kBlockStep, row = own - first - i * kBlockStep;
    if (own >= first && i < kStages - 1 && i < n_steps && row < kNk &&
        row % kRowsPerLoad == row_in) {
      unsigned char *st = stages + (i % kStages) * Layout::kStageBytes;
      const int64_t slot = sl.slot(p, own);  // -1 past the slice: zeros
      const int64_t head = (slot < 0 ? 0 : slot) * p.n_kv_heads + kvh;
      stage_fp8_piece<HD, kNk, false>(st, row, piece, p.k_cache, p.k_scale, head, slot >= 0, 0);
      stage_fp8_piece<HD, kNk, false>(st, kNk + row, piece, p.v_cache, p.v_scale, head, slot >= 0,
                                      1);
    }
  }
  pdl_launch_dependents();

  uint32_t qf[HD / 16][4];
  load_q_permuted<HD, GROUP>(
      p.q + (static_cast<int64_t>(sl.row) * p.n_heads + kvh * GROUP + g) * HD, p.scale, g, t4, qf);
  float o[HD / 8][4];
#pragma unroll
  for (int d = 0; d < HD / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;
  // The largest V scale seen so far (o holds the output in its units) and its inverse.
  float v_unit = 0.0f, v_inv = 0.0f;

  for (int i = 0; i < n_steps; ++i) {
    cp_async_wait<kStages - 2>();  // this lane's copies of step i
    __syncwarp();                  // ... and every lane's (and the step before is read)
    issue(i + kStages - 1, -1);    // into the stage step i - 1 used
    look_up(i + kStages);
    const unsigned char *st = stages + (i % kStages) * Layout::kStageBytes;
    const int base = first + i * kBlockStep;
    float row_scale[kNk / 16];  // stage rows lane + 32 j: K rows, then V rows
#pragma unroll
    for (int j = 0; j < kNk / 16; ++j)
      row_scale[j] = reinterpret_cast<const float *>(st + Layout::kScalesAt)[lane + 32 * j];
    float s[kNk / 8][4];
    score_fp8_keys<HD>(st, qf, g, t4, s);
    float mx_lo = m_lo, mx_hi = m_hi;
#pragma unroll
    for (int n = 0; n < kNk / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = n * 8 + 2 * t4 + (e & 1), key = base + row;
        // K rows are stage rows 0..kNk-1 <= 31: register 0 of lane `row`.
        const float ks = __shfl_sync(0xffffffffu, row_scale[0], row);  // the whole warp
        s[n][e] = key < sl.end ? s[n][e] * (kLog2e * ks) : -INFINITY;
      }
      mx_lo = fmaxf(mx_lo, fmaxf(s[n][0], s[n][1]));
      mx_hi = fmaxf(mx_hi, fmaxf(s[n][2], s[n][3]));
    }
    softmax_rescale<kNk, HD>(s, mx_lo, mx_hi, m_lo, m_hi, l_lo, l_hi, o);
    accumulate_pv_fp8<HD, Layout::kVStride>(st, s, o, vt, row_scale, v_unit, v_inv, lane);
  }
  scale_rows<HD>(o, v_unit, v_unit);  // back to the values' units
  cp_async_wait<0>();                 // only empty groups remain
  finish_mma_warps<HD, GROUP, CLUSTER>(p, sl.row, kvh, o, m_lo, l_lo, smem, [](int) {});
}

template <int HD, int GROUP>
cudaError_t launch(const PagedAttentionParams &p, bool cluster, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.n_seqs * p.n_kv_heads),
                  static_cast<unsigned>(p.n_splits));
  const size_t bytes = Fp8Layout<HD, GROUP>::kBytes;
  if (cluster)
    return launch_kernel_cluster(decode_mma_fp8_kernel<HD, GROUP, true>, grid, kWarps * 32, bytes,
                                 stream, dim3(1, static_cast<unsigned>(p.n_splits), 1), p);
  return launch_kernel(decode_mma_fp8_kernel<HD, GROUP, false>, grid, kWarps * 32, bytes, stream,
                       p);
}

template <int HD, int GROUP>
cudaError_t set_smem() {
  const int bytes = static_cast<int>(Fp8Layout<HD, GROUP>::kBytes);
  for (cudaError_t e : {cudaFuncSetAttribute(decode_mma_fp8_kernel<HD, GROUP, false>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
                        cudaFuncSetAttribute(decode_mma_fp8_kernel<HD, GROUP, true>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)})
    if (e != cudaSuccess) return e;
  return cudaSuccess;
}

}  // namespace

cudaError_t decode_attention_mma_fp8_init() {
  const cudaError_t e = set_smem<64, 4>();
  return e != cudaSuccess ? e : set_smem<64, 8>();
}

cudaError_t decode_attention_mma_fp8(const PagedAttentionParams &p, bool cluster,
                                     cudaStream_t stream) {
  if (p.head_dim != 64 || p.k_scale == nullptr) return cudaErrorInvalidValue;
  if (p.n_heads / p.n_kv_heads == 4) return launch<64, 4>(p, cluster, stream);
  return launch<64, 8>(p, cluster, stream);
}

}  // namespace vegas::kernels
