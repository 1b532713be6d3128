// verify_attention_warps for fp8 caches: the bf16 kernel's blocks, warps and
// end (verify_warps_common.cuh) with decode_attention_mma_fp8's stages. Staged
// in the bf16 kernel's rows and expanded there in place, an fp8 step kept as
// many keys in flight as bf16 for half the bytes and spent more instructions
// per key than bf16, so verifying from an fp8 cache was slower than from a
// bf16 one. Here each warp stages 32 keys a step as the cache has them (codes
// and scales, kv_fp8_stage.cuh), two stages deep in less shared memory than
// the bf16 kernel's three, and computes the step as two 16-key halves (the
// registers of one half's scores). K feeds the score mma straight from its
// codes in decode_attention_mma_fp8's permuted dimension order, the query
// vectors' A fragments in that order kept in shared memory for every step; V
// is expanded to f16 codes 16 keys at a time into a tile that ldmatrix reads
// transposed. Scales: the queries carry the softmax scale (f16), each score is
// multiplied by its key's K scale (so scores are logits, which the capture
// stores), each P V weight by its key's V scale over v_unit (the largest seen
// so far, in whose units o is kept).
#include <cstdint>

#include "kv_fp8_stage.cuh"
#include "verify_warps_common.cuh"

namespace vegas::kernels::verify_warps {

namespace {

constexpr int kHalf = 16;  // keys computed at once (a stage holds one or two)

// NK keys a warp step, STAGES stages a warp (STAGES - 1 steps in flight).
template <int HD, int MT, int NK, int STAGES>
struct Fp8WarpsLayout {
  static constexpr int kNk = NK, kStages = STAGES;
  static constexpr int kRows = 2 * kNk;  // a stage: kNk K rows, then kNk V rows
  static constexpr int kScalesAt = kRows * HD;
  static constexpr int kStageBytes = kScalesAt + kRows * 4;
  static constexpr int kVStride = HD + 8;  // f16 a row of the V tile: conflict-free ldmatrix
  static constexpr int kWarpBytes = kStages * kStageBytes + kHalf * kVStride * 2;
  static constexpr size_t tiles_bytes = size_t{kWarps} * kWarpBytes;
  static constexpr size_t comb_bytes = Combination<HD, MT>::bytes;
  static constexpr size_t work_bytes = tiles_bytes > comb_bytes ? tiles_bytes : comb_bytes;
  // The query vectors' A fragments: [m][kc][lane] four f16 pairs.
  static constexpr size_t q_bytes = sizeof(uint4) * MT * (HD / 16) * 32;
  static constexpr size_t smem = work_bytes + q_bytes;
};

// The A fragments of the block's query vectors in the permuted dimension order
// of decode_attention_mma_fp8 (k-slots 2 t4, 2 t4 + 1 stand for dimensions
// kc * 16 + 4 t4 + {0, 1}, k-slots 2 t4 + 8, 2 t4 + 9 for + {2, 3}), f16 times
// the softmax scale, zeros past v_last; entry (m, kc, lane) is lane's
// fragment of M tile m and chunk kc.
template <int HD, int MT>
__device__ __forceinline__ void stage_q_fragments(const PagedAttentionParams &p,
                                                  const VerifySlice &vs, int kvh, uint4 *q_frag) {
  for (int i = threadIdx.x; i < MT * (HD / 16) * 32; i += kThreads) {
    const int m = i / (HD / 16 * 32), kc = i / 32 % (HD / 16), ln = i % 32;
    const int gq = ln >> 2, tq = ln & 3;
    uint32_t a[4];
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int v = m * 16 + gq + 8 * hi;
      uint2 four = make_uint2(0, 0);
      if (v <= vs.v_last) {
        const int64_t row = vs.row_start + v / vs.group;
        four = *reinterpret_cast<const uint2 *>(
            p.q + (row * p.n_heads + kvh * vs.group + v % vs.group) * HD + kc * 16 + 4 * tq);
      }
      const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&four.x));
      const float2 up = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&four.y));
      a[hi] = pack_f16(lo.x * p.scale, lo.y * p.scale);
      a[2 + hi] = pack_f16(up.x * p.scale, up.y * p.scale);
    }
    q_frag[i] = make_uint4(a[0], a[1], a[2], a[3]);
  }
}

// S = Q K^T for keys half * 16 .. + 15 of a stage, every M tile, times each
// key's K scale (scales: the stage's, K rows first).
template <int HD, int MT, int NK>
__device__ __forceinline__ void score_half(const unsigned char *stage, const float *scales,
                                           const uint4 *q_frag, int half, int lane,
                                           float (&s)[MT][2][4]) {
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n) s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.0f;
#pragma unroll
  for (int kc = 0; kc < HD / 16; ++kc) {
    uint32_t b[2][2];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const uint32_t four = *reinterpret_cast<const uint32_t *>(
          stage + chunk_at<HD>(half * kHalf + n * 8 + g, kc) + 4 * t4);
      b[n][0] = e4m3_pair_to_f16(four & 0xffffu);
      b[n][1] = e4m3_pair_to_f16(four >> 16);
    }
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const uint4 q = q_frag[(m * (HD / 16) + kc) * 32 + lane];
      const uint32_t a[4] = {q.x, q.y, q.z, q.w};
      mma_f16(s[m][0], a, b[0][0], b[0][1]);
      mma_f16(s[m][1], a, b[1][0], b[1][1]);
    }
  }
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float ks = scales[half * kHalf + n * 8 + 2 * t4 + e];
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        s[m][n][e] *= ks;
        s[m][n][e + 2] *= ks;
      }
    }
}

// O += P V for the half's 16 V rows (stage rows kNk + half * 16 ..), expanded
// into vt; each weight times its key's V scale (scales: the stage's, V rows
// from kNk) times v_inv.
template <int HD, int MT, int NK, int STRIDE>
__device__ __forceinline__ void accumulate_half(const unsigned char *stage, const float *scales,
                                                int half, float v_inv, bf16 *vt, int lane,
                                                float (&s)[MT][2][4], float (&o)[MT][HD / 8][4]) {
  const int t4 = lane & 3;
  __syncwarp();  // the tile's previous chunk is read
  expand_v_rows<HD, STRIDE>(stage, NK + half * kHalf, vt, lane);
  __syncwarp();
  float w[2][2];
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) w[n][e] = v_inv * scales[NK + half * kHalf + n * 8 + 2 * t4 + e];
  uint32_t a[MT][4];
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    a[m][0] = pack_f16(s[m][0][0] * w[0][0], s[m][0][1] * w[0][1]);
    a[m][1] = pack_f16(s[m][0][2] * w[0][0], s[m][0][3] * w[0][1]);
    a[m][2] = pack_f16(s[m][1][0] * w[1][0], s[m][1][1] * w[1][1]);
    a[m][3] = pack_f16(s[m][1][2] * w[1][0], s[m][1][3] * w[1][1]);
  }
#pragma unroll
  for (int d2 = 0; d2 < HD / 16; ++d2) {
    uint32_t b[4];
    ldmatrix_x4_trans(
        b, vt + (((lane >> 3) & 1) * 8 + (lane & 7)) * STRIDE + d2 * 16 + (lane >> 4) * 8);
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      mma_f16(o[m][2 * d2], a[m], b[0], b[1]);
      mma_f16(o[m][2 * d2 + 1], a[m], b[2], b[3]);
    }
  }
}

// HALF_PAGES: pages hold a multiple of 16 slots, so each 16-key half of a
// step lies in one page (steps start at multiples of NK keys: the split
// ranges are whole 64-key tiles): a page-table read a half. Else each key is
// looked up.
template <int HD, int MT, int NK, int STAGES, bool HALF_PAGES>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    verify_warps_fp8_kernel(PagedAttentionParams p) {
  using L = Fp8WarpsLayout<HD, MT, NK, STAGES>;
  constexpr int kNk = NK, kStages = STAGES, kHalves = NK / kHalf;
  constexpr int kPieces = HD / 16;            // 16-code pieces of a row
  constexpr int kRowsPerLoad = 32 / kPieces;  // rows one warp copy covers
  constexpr int kLoads = kNk / kRowsPerLoad;  // copies per lane per step, for K and for V
  constexpr int kBlockStep = kWarps * kNk;
  static_assert(kRowsPerLoad * 2 == kHalf, "a lane's copies 2 h, 2 h + 1 fall in half h");
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const int row_in = lane / kPieces, piece = lane % kPieces;
  unsigned char *stages = smem + warp * L::kWarpBytes;
  bf16 *vt = reinterpret_cast<bf16 *>(stages + kStages * L::kStageBytes);
  uint4 *q_frag = reinterpret_cast<uint4 *>(smem + L::work_bytes);

  if (!p.read_ahead) pdl_wait();  // else the wait follows the first copies
  VerifySlice vs;
  if (!verify_slice(p, &vs)) return;
  const int kvh = blockIdx.x % p.n_kv_heads;
  const int first = vs.begin + warp * kNk;  // this warp's steps: first + i * kBlockStep
  const int n_steps = first < vs.end ? (vs.end - first + kBlockStep - 1) / kBlockStep : 0;
  auto key_of = [&](int i, int r) { return first + i * kBlockStep + r * kRowsPerLoad + row_in; };
  const int page_shift = page_shift_of(p.page_size);
  auto slot_of = [&](int key) { return page_slot(vs.table, p.page_size, page_shift, key); };
  // Looked up one issue ahead, as in the bf16 kernel. HALF_PAGES: slots[h] is
  // half h's first slot.
  int32_t slots[kLoads];
  auto look_up = [&](int i) {
    if (i >= n_steps) return;
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      if (HALF_PAGES && r >= kHalves) break;
      const int key = HALF_PAGES ? first + i * kBlockStep + r * kHalf : key_of(i, r);
      slots[r] = key < vs.end ? slot_of(key) : -1;
    }
  };
  auto row_slot = [&](int i, int r) {
    if (!HALF_PAGES) return slots[r];
    return key_of(i, r) < vs.end ? slots[r / 2] + (r % 2) * kRowsPerLoad + row_in : -1;
  };
  // Step i's rows into its stage, zeros past the range; K's scales by the
  // piece-0 lanes, V's by the piece-1 lanes. Before the PDL wait
  // (read-ahead), the verified rows' own keys (from start_pos on, written by
  // the previous kernel) are left out.
  auto issue = [&](int i, bool before_wait) {
    if (i < n_steps) {
      unsigned char *st = stages + (i % kStages) * L::kStageBytes;
#pragma unroll
      for (int r = 0; r < kLoads; ++r) {
        const int key = key_of(i, r), row = r * kRowsPerLoad + row_in;
        const int32_t slot = row_slot(i, r);
        if (before_wait && slot >= 0 && key >= vs.start_pos) continue;
        const int64_t head = int64_t{slot >= 0 ? slot : 0} * p.n_kv_heads + kvh;
        stage_fp8_piece<HD, kNk, true>(st, row, piece, p.k_cache, p.k_scale, head, slot >= 0, 0);
        stage_fp8_piece<HD, kNk, true>(st, kNk + row, piece, p.v_cache, p.v_scale, head, slot >= 0,
                                       1);
      }
    }
    cp_async_commit();  // empty past the last step: the group count stays uniform
  };
  // With read-ahead, the verified rows' own keys of the steps issued early
  // are copied after the wait, with plain loads (each looked up again:
  // slots[] holds only the last issued step's).
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    look_up(i);
    issue(i, p.read_ahead != 0);
  }
  if (p.read_ahead) {
    pdl_wait();
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) {
      if (i >= n_steps) break;
      unsigned char *st = stages + i * L::kStageBytes;
#pragma unroll
      for (int r = 0; r < kLoads; ++r) {
        const int key = key_of(i, r), row = r * kRowsPerLoad + row_in;
        if (key < vs.start_pos || key >= vs.end) continue;
        const int64_t head = int64_t{slot_of(key)} * p.n_kv_heads + kvh;
        stage_fp8_piece<HD, kNk, false>(st, row, piece, p.k_cache, p.k_scale, head, true, 0);
        stage_fp8_piece<HD, kNk, false>(st, kNk + row, piece, p.v_cache, p.v_scale, head, true, 1);
      }
    }
  }
  look_up(kStages - 1);
  stage_q_fragments<HD, MT>(p, vs, kvh, q_frag);
  __syncthreads();
  pdl_launch_dependents();

  const Capture<MT> cp = capture_rows<MT>(p, vs, kvh, g);
  SoftmaxState<MT, HD> st;
  st.clear();
  float v_unit = 0.0f, v_inv = 0.0f;  // the largest V scale seen, its inverse

  for (int i = 0; i < n_steps; ++i) {
    cp_async_wait<kStages - 2>();   // this lane's copies of step i
    __syncwarp();                   // ... and every lane's (and the step before is read)
    issue(i + kStages - 1, false);  // into the stage step i - 1 used
    look_up(i + kStages);
    const unsigned char *stage = stages + (i % kStages) * L::kStageBytes;
    const float *scales = reinterpret_cast<const float *>(stage + L::kScalesAt);
    raise_v_unit(lane < kNk ? scales[kNk + lane] : 0.0f, v_unit, v_inv, [&](float f) {
#pragma unroll
      for (int m = 0; m < MT; ++m) scale_rows<HD>(st.o[m], f, f);
    });
#pragma unroll 1
    for (int half = 0; half < kHalves; ++half) {
      float s[MT][2][4];
      score_half<HD, MT, kNk>(stage, scales, q_frag, half, lane, s);
      mask_capture_softmax<MT, HD>(p, vs, cp, first + i * kBlockStep + half * kHalf, 1.0f, kLog2e,
                                   s, st);
      accumulate_half<HD, MT, kNk, L::kVStride>(stage, scales, half, v_inv, vt, lane, s, st.o);
    }
  }
#pragma unroll
  for (int m = 0; m < MT; ++m) scale_rows<HD>(st.o[m], v_unit, v_unit);  // the values' units
  cp_async_wait<0>();                                                    // only empty groups remain
  __syncthreads();  // every warp is done with its stages: they become the combination space
  finish_verify_warps<HD, MT>(p, vs, kvh, st, smem);
}

template <int HD, int MT, int NK, int STAGES>
cudaError_t launch(const PagedAttentionParams &p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(int64_t{p.n_seqs} * p.n_kv_heads), 1u,
                  static_cast<unsigned>(p.n_splits));
  const size_t smem = Fp8WarpsLayout<HD, MT, NK, STAGES>::smem;
  if (p.page_size % kHalf == 0)
    return launch_kernel(verify_warps_fp8_kernel<HD, MT, NK, STAGES, true>, grid, kThreads, smem,
                         stream, p);
  return launch_kernel(verify_warps_fp8_kernel<HD, MT, NK, STAGES, false>, grid, kThreads, smem,
                       stream, p);
}

template <int HD, int MT, int NK, int STAGES>
cudaError_t set_smem() {
  using L = Fp8WarpsLayout<HD, MT, NK, STAGES>;
  static_assert(L::smem * kMinBlocks + 2048 <= 228 * 1024, "kMinBlocks blocks per multiprocessor");
  static_assert(sizeof(float) * 16 * MT * (64 + 1) <= L::work_bytes, "merge_splits' scratch");
  const int bytes = static_cast<int>(L::smem);
  const auto attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
  for (cudaError_t e :
       {cudaFuncSetAttribute(verify_warps_fp8_kernel<HD, MT, NK, STAGES, true>, attr, bytes),
        cudaFuncSetAttribute(verify_warps_fp8_kernel<HD, MT, NK, STAGES, false>, attr, bytes)})
    if (e != cudaSuccess) return e;
  return cudaSuccess;
}

// Splits of at least kLongSplitKeys keys take 32-key steps two stages deep
// (fewer waits and look-ups a key), shorter ones 16-key steps three deep
// (one step more in flight, a shorter start): the README has the timings.
constexpr int kLongSplitKeys = 2048;

template <int MT>
cudaError_t launch_for(const PagedAttentionParams &p, cudaStream_t stream) {
  const int64_t per_split = (int64_t{p.max_keys} + p.n_splits - 1) / p.n_splits;
  if (per_split >= kLongSplitKeys) return launch<64, MT, 32, 2>(p, stream);
  return launch<64, MT, 16, 3>(p, stream);
}

}  // namespace

cudaError_t fp8_init() {
  for (cudaError_t e : {set_smem<64, 1, 32, 2>(), set_smem<64, 2, 32, 2>(),
                        set_smem<64, 1, 16, 3>(), set_smem<64, 2, 16, 3>()})
    if (e != cudaSuccess) return e;
  return cudaSuccess;
}

cudaError_t fp8_launch(const PagedAttentionParams &p, int64_t vectors, cudaStream_t stream) {
  return vectors <= 16 ? launch_for<1>(p, stream) : launch_for<2>(p, stream);
}

}  // namespace vegas::kernels::verify_warps
