// verify_attention for head_dim 64 when every verified sequence has at most 32
// query vectors per KV head (1 + γ <= 8 rows at GQA 4): decode_attention_mma's
// structure with the verification rows. Each of a block's eight warps streams
// its own 16-key steps through three cp.async stages of its own shared memory,
// with no block barrier in the loop, and scores every step against all of the
// block's query vectors (one or two m16 tiles), so one K/V load serves every
// row and every head of the group. The tiled kernel (verify_attention.cu) moves
// 64-key tiles two stages deep with a block barrier per tile, so each block has
// one tile in flight and waits on every one; this kernel keeps two steps per
// warp in flight. The key ranges of the splits, the causal mask, the score
// capture, the split workspace and the output contract are the tiled kernel's.
#include <algorithm>
#include <cstdint>
#include <cuda/atomic>

#include "kv_fp8.cuh"
#include "mma_fragments.cuh"
#include "verify_attention.cuh"
#include "verify_output.cuh"

namespace vegas::kernels {

namespace {

using namespace mma;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kNk = 16;          // keys per warp step
constexpr int kStages = 3;       // per warp: the step computed and two in flight
constexpr int kMinBlocks = 2;    // per multiprocessor: ~115 KB of shared memory each
constexpr int kSplitRound = 64;  // split ranges in whole 64-key tiles, as the tiled kernel's
constexpr int kMaxVectors = 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int HD, int MT>
struct WarpsLayout {
  static constexpr int kStride = HD + 8;       // bf16 per staged row: conflict-free ldmatrix
  static constexpr int kTile = kNk * kStride;  // one K (or V) stage of a warp
  static constexpr int kVec = 16 * MT;         // query vectors of a block
  static constexpr int kOStride = HD + 8;      // floats per vector in the combination
  static constexpr size_t tiles_bytes = sizeof(bf16) * kWarps * kStages * 2 * kTile;
  // After the loop: every warp's unnormalised outputs [warp][vec][kOStride], m and l [warp][vec].
  static constexpr size_t comb_bytes = sizeof(float) * kWarps * kVec * (kOStride + 2);
  static constexpr size_t work_bytes = tiles_bytes > comb_bytes ? tiles_bytes : comb_bytes;
  static constexpr size_t q_bytes = sizeof(bf16) * kVec * kStride;
  static constexpr size_t smem = work_bytes + q_bytes;
};

// With split counters, the last split block of a (sequence, KV head) to
// finish merges every split's partial results, as decode_finish does (no
// merge kernel then): the barrier orders the block's partial writes before
// thread 0's acquire-release count, which in the last block acquires
// everyone's; the partials are read from L2. `scratch` is the block's shared
// memory, free after the combination.
template <int HD, int VEC>
__device__ __forceinline__ void merge_splits(const PagedAttentionParams &p, int n_vec,
                                             int row_start, int group, int kvh, float *scratch) {
  constexpr int kPieces = HD / 8;
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::atomic_ref<int32_t, cuda::thread_scope_device> counter(p.split_counters[blockIdx.x]);
    last = counter.fetch_add(1, cuda::memory_order_acq_rel) == p.n_splits - 1;
    if (last) counter.store(0, cuda::memory_order_relaxed);  // ready for the next launch
  }
  __syncthreads();
  if (!last) return;
  const int64_t split_stride = static_cast<int64_t>(p.total_rows) * p.n_heads;
  auto item_of = [&](int v) {  // split 0's (row, head) of vector v
    return (row_start + v / group) * static_cast<int64_t>(p.n_heads) + kvh * group + v % group;
  };
  float *weight = scratch;              // [VEC][64 splits at most]: lse, then normalised weights
  float *lse_all = scratch + VEC * 64;  // [VEC], log2 domain
  for (int i = threadIdx.x; i < n_vec * p.n_splits; i += kThreads) {
    const int v = i / p.n_splits, z = i % p.n_splits;
    weight[v * 64 + z] = __ldcg(p.partial_lse + z * split_stride + item_of(v));
  }
  __syncthreads();
  if (threadIdx.x < n_vec) {
    float *w = weight + threadIdx.x * 64;
    float m = -INFINITY, sum = 0.0f;
    for (int z = 0; z < p.n_splits; ++z) m = fmaxf(m, w[z]);
    for (int z = 0; z < p.n_splits; ++z) {
      w[z] = m == -INFINITY || w[z] == -INFINITY ? 0.0f : exp2f(w[z] - m);
      sum += w[z];
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int z = 0; z < p.n_splits; ++z) w[z] *= inv;
    lse_all[threadIdx.x] = sum > 0.0f ? m + log2f(sum) : -INFINITY;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n_vec * kPieces; i += kThreads) {
    const int v = i / kPieces, c = i % kPieces;
    const int64_t item = item_of(v);
    const float *w = weight + v * 64;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    // kBatch splits' partials requested at once: one L2 round trip per batch
    // instead of one per split.
    constexpr int kBatch = 8;
    for (int z0 = 0; z0 < p.n_splits; z0 += kBatch) {
      float4 a[kBatch], b[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int z = z0 + k;
        a[k] = b[k] = make_float4(0, 0, 0, 0);
        if (z >= p.n_splits || w[z] == 0.0f) continue;  // an empty split is never added
        const float *po = p.partial_out + (z * split_stride + item) * HD + c * 8;
        a[k] = __ldcg(reinterpret_cast<const float4 *>(po));
        b[k] = __ldcg(reinterpret_cast<const float4 *>(po + 4));
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const float wz = z0 + k < p.n_splits ? w[z0 + k] : 0.0f;
        acc[0] += wz * a[k].x, acc[1] += wz * a[k].y, acc[2] += wz * a[k].z;
        acc[3] += wz * a[k].w, acc[4] += wz * b[k].x, acc[5] += wz * b[k].y;
        acc[6] += wz * b[k].z, acc[7] += wz * b[k].w;
      }
    }
    *reinterpret_cast<uint4 *>(p.out + item * HD + c * 8) = pack8(acc);
    if (c == 0 && p.cap_logits != nullptr) {
      const int slot = p.row_cap_slot[row_start + v / group];
      if (slot >= 0)
        p.cap_lse[static_cast<int64_t>(slot) * p.n_heads + kvh * group + v % group] =
            lse_all[v] * kLn2;  // -inf stays
    }
  }
}

// The online softmax of one key step for a warp's 16-vector M tile (this
// thread: rows g and g + 8), on unscaled scores s (-inf = hidden) whose
// maxima over the step are mx_lo / mx_hi. The running reference maxima
// m_lo / m_hi (log2 domain) may lag the true maxima by up to kRescaleSlack:
// weights then reach 2^kRescaleSlack, which f32 sums and bf16 P fragments
// hold at full relative precision, and the output and l are rescaled only
// when some row of the warp outgrows its reference by more than that
// (FlashAttention-4's conditional rescaling). With 16 keys a step and 8 steps
// a warp, a new maximum somewhere in the warp's 32 vectors came nearly every
// step, so the exact-maximum rule rescaled 64 accumulators almost every step.
// m + log2(l) and the combination across warps and splits are unchanged.
constexpr float kRescaleSlack = 8.0f;

template <int NK, int HD>
__device__ __forceinline__ void lazy_softmax(float (&s)[NK / 8][4], float mx_lo, float mx_hi,
                                             float scale, float &m_lo, float &m_hi, float &l_lo,
                                             float &l_hi, float (&o)[HD / 8][4]) {
  mx_lo = quad_max(mx_lo) * scale;  // -inf stays -inf (scale > 0)
  mx_hi = quad_max(mx_hi) * scale;
  const bool grow_lo = mx_lo > m_lo + kRescaleSlack;  // false while the row sees nothing
  const bool grow_hi = mx_hi > m_hi + kRescaleSlack;
  if (__any_sync(0xffffffffu, grow_lo || grow_hi)) {
    // exp2(-inf - finite) = 0 for a row's first keys; 1 exactly where it keeps its reference.
    const float alpha_lo = grow_lo ? exp2_ftz(m_lo - mx_lo) : 1.0f;
    const float alpha_hi = grow_hi ? exp2_ftz(m_hi - mx_hi) : 1.0f;
    if (grow_lo) m_lo = mx_lo;
    if (grow_hi) m_hi = mx_hi;
    l_lo *= alpha_lo;
    l_hi *= alpha_hi;
    scale_rows<HD>(o, alpha_lo, alpha_hi);
  }
  // A row that has seen no key yet: base 0 keeps every weight exp2(-inf) = 0.
  const float base_lo = m_lo == -INFINITY ? 0.0f : m_lo;
  const float base_hi = m_hi == -INFINITY ? 0.0f : m_hi;
  float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
  for (int n = 0; n < NK / 8; ++n) {
    s[n][0] = exp2_ftz(fmaf(s[n][0], scale, -base_lo));
    s[n][1] = exp2_ftz(fmaf(s[n][1], scale, -base_lo));
    s[n][2] = exp2_ftz(fmaf(s[n][2], scale, -base_hi));
    s[n][3] = exp2_ftz(fmaf(s[n][3], scale, -base_hi));
    sum_lo += s[n][0] + s[n][1];
    sum_hi += s[n][2] + s[n][3];
  }
  l_lo += sum_lo;
  l_hi += sum_hi;
}

// Eight bf16 as eight f16 times `scale` (the fp8 path's queries).
__device__ __forceinline__ uint4 bf16x8_to_f16x8(uint4 v, float scale) {
  uint32_t *w = reinterpret_cast<uint32_t *>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&w[i]));
    w[i] = pack_f16(f.x * scale, f.y * scale);
  }
  return v;
}

// Every M tile's scores of a step times their keys' K scales (key row r's
// scale held by lane r): this thread's keys are n * 8 + 2 t4 + {0, 1}.
template <int MT>
__device__ __forceinline__ void scale_by_key_fp8(float (*s)[kNk / 8][4], float row_scale, int t4) {
#pragma unroll
  for (int n = 0; n < kNk / 8; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float ks = __shfl_sync(0xffffffffu, row_scale, n * 8 + 2 * t4 + e);
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        s[m][n][e] *= ks;
        s[m][n][e + 2] *= ks;
      }
    }
}

// O += P V for an fp8 step, every M tile: V's rows are unscaled f16 codes,
// V row r's scale held by lane 16 + r. Each weight is multiplied by its key's
// scale times v_inv = 1 / v_unit, the largest V scale seen so far (o is kept
// in v_unit's units, rescaled exactly, powers of two, when a larger one
// comes), so the f16 weights stay within lazy_softmax's bound.
template <int MT, int HD, int STRIDE>
__device__ __forceinline__ void accumulate_pv_fp8(float (*s)[kNk / 8][4], float (*o)[HD / 8][4],
                                                  const bf16 *vt, float row_scale, float &v_unit,
                                                  float &v_inv, int lane) {
  raise_v_unit(lane >= kNk ? row_scale : 0.0f, v_unit, v_inv, [&](float f) {
#pragma unroll
    for (int m = 0; m < MT; ++m) scale_rows<HD>(o[m], f, f);
  });
  const int t4 = lane & 3;
  float w[kNk / 8][2];  // this thread's keys' factors: n * 8 + 2 t4 + {0, 1}
#pragma unroll
  for (int n = 0; n < kNk / 8; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e)
      w[n][e] = v_inv * __shfl_sync(0xffffffffu, row_scale, kNk + n * 8 + 2 * t4 + e);
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

// STEP_PAGES: pages hold a multiple of kNk slots (see look_up). FP8: fp8
// caches (kv_fp8.cuh): each step's rows are expanded in place to unscaled f16
// codes (one conversion a pair) and the scales applied where they are cheap:
// the queries are f16 times the softmax scale, each score is multiplied by
// its key's K scale, each P V weight by its key's V scale over v_unit (the
// largest seen so far, in whose units o is kept, as in
// decode_attention_mma_fp8.cu).
template <int HD, int MT, bool STEP_PAGES, bool FP8>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    verify_warps_kernel(PagedAttentionParams p) {
  using L = WarpsLayout<HD, MT>;
  constexpr int kStride = L::kStride, kVec = L::kVec;
  constexpr int kPieces = HD / 8;             // 16-byte pieces of a key row
  constexpr int kRowsPerLoad = 32 / kPieces;  // key rows one warp copy covers
  constexpr int kLoads = kNk / kRowsPerLoad;  // copies per lane per step, for K and for V
  constexpr int kBlockStep = kWarps * kNk;
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t4 = lane & 3;
  const int row_in = lane / kPieces, piece = lane % kPieces;
  bf16 *tiles = reinterpret_cast<bf16 *>(smem) + warp * kStages * 2 * L::kTile;
  bf16 *q_s = reinterpret_cast<bf16 *>(smem + L::work_bytes);

  if (!p.read_ahead) pdl_wait();  // else the wait follows the first copies
  const int seq = blockIdx.x / p.n_kv_heads, kvh = blockIdx.x % p.n_kv_heads;
  const int n_rows = p.seq_n_rows[seq];
  if (!defers_to_verify(p, seq, n_rows)) return;
  const int group = p.n_heads / p.n_kv_heads;
  const int v_last = n_rows * group - 1;  // query vectors (row, head in group), row-major
  const int start_pos = p.seq_start_pos[seq];
  const int row_start = p.seq_row_start[seq];
  const int32_t *table = p.page_table + p.seq_page_off[seq];
  // Split z of keys [0, n_keys) in whole 64-key tiles (the tiled kernel's ranges).
  const int n_keys = start_pos + n_rows;
  const int per_split =
      ((n_keys + p.n_splits - 1) / p.n_splits + kSplitRound - 1) / kSplitRound * kSplitRound;
  const int begin = static_cast<int>(
      min(static_cast<int64_t>(n_keys), static_cast<int64_t>(blockIdx.z) * per_split));
  const int end = min(n_keys, begin + per_split);
  const int n_cand = p.cap_logits == nullptr ? 0 : p.seq_cap_cand[seq];

  const int64_t row_stride = static_cast<int64_t>(p.n_kv_heads) * HD;
  const int64_t head_off = static_cast<int64_t>(kvh) * HD + piece * 8;
  const int first = begin + warp * kNk;  // this warp's steps: first + i * kBlockStep
  const int n_steps = first < end ? (end - first + kBlockStep - 1) / kBlockStep : 0;
  // This lane's key rows of step i: first + i * kBlockStep + r * kRowsPerLoad
  // + row_in. Steps start at multiples of 16 keys (the split ranges are whole
  // 64-key tiles), so with pages a multiple of 16 slots a step lies in one
  // page and its rows are consecutive slots: one page-table read per step,
  // made one issue ahead so its latency passes during a step's compute, and
  // the lane's four copies at a fixed stride from one address (STEP_PAGES).
  // Other page sizes look each key up.
  auto key_of = [&](int i, int r) { return first + i * kBlockStep + r * kRowsPerLoad + row_in; };
  const int page_shift = (p.page_size & (p.page_size - 1)) == 0 ? __ffs(p.page_size) - 1 : -1;
  // (Slot numbers fit int32: CudaContext's pool has fewer slots.)
  auto slot_of = [&](int key) {
    const int page = page_shift >= 0 ? key >> page_shift : key / p.page_size;
    return table[page] * p.page_size + (key - page * p.page_size);
  };
  const int64_t lane_off = row_in * row_stride + head_off;  // of the lane's first row
  const int64_t r_stride = kRowsPerLoad * row_stride;
  int32_t slots[kLoads];  // STEP_PAGES: slots[0] = the step's first slot
  auto look_up = [&](int i) {
    if (i >= n_steps) return;
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      if (STEP_PAGES && r > 0) break;
      const int key = key_of(i, r);
      slots[r] = STEP_PAGES ? slot_of(first + i * kBlockStep) : key < end ? slot_of(key) : -1;
    }
  };
  // Step i (slots looked up) into its stage, zeros past the range (which P V
  // must see finite). Before the PDL wait (read-ahead), keys from start_pos
  // on, the verified rows' own, written by the previous kernel, are left out.
  auto issue = [&](int i, bool before_wait) {
    if (i < n_steps) {
      bf16 *kt = tiles + (i % kStages) * 2 * L::kTile + row_in * kStride;  // the lane's first row
      bf16 *vt = kt + L::kTile;
      const int64_t at0 = int64_t{slots[0]} * row_stride + lane_off;  // STEP_PAGES
#pragma unroll
      for (int r = 0; r < kLoads; ++r) {
        const int key = key_of(i, r);
        const bool valid = key < end;
        if (before_wait && valid && key >= start_pos) continue;
        int64_t at = 0;
        if (STEP_PAGES)
          at = valid ? at0 + r * r_stride : 0;
        else
          at = valid ? int64_t{slots[r]} * row_stride + head_off : 0;
        const int row = r * kRowsPerLoad;
        stage_piece<HD, FP8>(kt + row * kStride, piece, p.k_cache, p.k_scale, at, valid);
        stage_piece<HD, FP8>(vt + row * kStride, piece, p.v_cache, p.v_scale, at, valid);
      }
    }
    cp_async_commit();  // empty past the last step: the group count stays uniform
  };
  // With read-ahead, keys below start_pos are final before the PDL wait; the
  // verified rows' own keys are copied after it, with plain loads, into the
  // steps issued early.
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    look_up(i);
    issue(i, p.read_ahead != 0);
  }
  look_up(kStages - 1);
  if (p.read_ahead) {
    pdl_wait();
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) {
      if (i >= n_steps) break;
      bf16 *kt = tiles + (i % kStages) * 2 * L::kTile, *vt = kt + L::kTile;
#pragma unroll
      for (int r = 0; r < kLoads; ++r) {
        const int key = key_of(i, r);
        if (key < start_pos || key >= end) continue;
        const int64_t at = int64_t{slot_of(key)} * row_stride + head_off;
        const int row = r * kRowsPerLoad + row_in;
        store_piece<HD, FP8>(kt + row * kStride, piece, p.k_cache, p.k_scale, at, true);
        store_piece<HD, FP8>(vt + row * kStride, piece, p.v_cache, p.v_scale, at, true);
      }
    }
  }
  // The query vectors (written by the previous kernel), zeros past v_last.
  for (int i = threadIdx.x; i < kVec * kPieces; i += kThreads) {
    const int v = i / kPieces, c = i % kPieces;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (v <= v_last) {
      const int64_t row = row_start + v / group;
      val = *reinterpret_cast<const uint4 *>(
          p.q + (row * p.n_heads + kvh * group + v % group) * HD + c * 8);
    }
    if constexpr (FP8) val = bf16x8_to_f16x8(val, p.scale);  // mma_f16's A side
    *reinterpret_cast<uint4 *>(q_s + v * kStride + c * 8) = val;
  }
  __syncthreads();
  pdl_launch_dependents();

  // This thread's vectors in M tile m are m * 16 + g and m * 16 + g + 8; a
  // captured one writes its scores to capture row cap[m][hi] (in units of
  // cap_stride; -1 = none: offsets take fewer registers than pointers).
  int32_t cap[MT][2];
  bool any_capture = false;
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int gv = m * 16 + g + 8 * hi;
      cap[m][hi] = -1;
      if (p.cap_logits != nullptr && gv <= v_last) {
        const int slot = p.row_cap_slot[row_start + gv / group];
        if (slot >= 0) cap[m][hi] = slot * p.n_heads + kvh * group + gv % group;
      }
      any_capture = any_capture || cap[m][hi] >= 0;
    }
  any_capture = __any_sync(0xffffffffu, any_capture);
  // A thread's keys come in pairs (2 t4, 2 t4 + 1; even positions: steps start
  // at multiples of 16), stored as one half2 where the rows are 4-byte aligned.
  const bool cap_pairs = (p.cap_stride & 1) == 0;

  float o[MT][HD / 8][4];
  float m_lo[MT], m_hi[MT], l_lo[MT], l_hi[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int d = 0; d < HD / 8; ++d) o[m][d][0] = o[m][d][1] = o[m][d][2] = o[m][d][3] = 0.0f;
    m_lo[m] = m_hi[m] = -INFINITY;
    l_lo[m] = l_hi[m] = 0.0f;
  }
  // FP8: the queries carry p.scale, so the scores are logits already.
  const float logit_scale = FP8 ? 1.0f : p.scale;
  const float scale = logit_scale * kLog2e;  // softmax in the log2 domain
  float v_unit = 0.0f, v_inv = 0.0f;         // FP8: the largest V scale seen, its inverse

  for (int i = 0; i < n_steps; ++i) {
    cp_async_wait<kStages - 2>();   // this lane's copies of step i
    __syncwarp();                   // ... and every lane's (and the step before is read)
    issue(i + kStages - 1, false);  // into the stage step i - 1 used
    look_up(i + kStages);
    bf16 *kt = tiles + (i % kStages) * 2 * L::kTile, *vt = kt + L::kTile;
    const int base = first + i * kBlockStep;
    float row_scale = 0.0f;  // FP8: lane l expands K row l (l < 16) or V row l - 16
    if constexpr (FP8) {     // (V rows follow K's: vt = kt + kNk rows) and holds its scale
      row_scale = expand_staged_row_f16<HD>(kt + lane * kStride);
      __syncwarp();
    }

    // S = Q K^T: K rows are B's columns; one ldmatrix.x4 gives both 8-key
    // n-tiles, used by every M tile (Q fragments re-read from shared memory
    // to keep the registers for the accumulators).
    float s[MT][kNk / 8][4];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int n = 0; n < kNk / 8; ++n) s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < HD / 16; ++kc) {
      uint32_t b[4];
      ldmatrix_x4(b,
                  kt + ((lane >> 4) * 8 + (lane & 7)) * kStride + kc * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        uint32_t a[4];
        ldmatrix_x4(a, q_s + (m * 16 + (lane & 15)) * kStride + kc * 16 + (lane >> 4) * 8);
        if constexpr (FP8) {
          mma_f16(s[m][0], a, b[0], b[1]);
          mma_f16(s[m][1], a, b[2], b[3]);
        } else {
          mma_bf16(s[m][0], a, b[0], b[1]);
          mma_bf16(s[m][1], a, b[2], b[3]);
        }
      }
    }
    if constexpr (FP8) scale_by_key_fp8<MT>(s, row_scale, t4);

    // Mask (causal diagonal, end of the range), capture, online softmax. The
    // scores stay unscaled: the capture stores s * scale (the logit), the
    // softmax takes exp2(s * scale_log2 - m) in one FFMA.
    const bool masked = base + kNk - 1 > start_pos || base + kNk > end;
    const bool capture = any_capture && base < n_cand;
    // Every key of the step seen and a candidate, rows 4-byte aligned: each
    // thread stores its key pairs without a check per key.
    const bool whole_capture = capture && !masked && base + kNk <= n_cand && cap_pairs;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (whole_capture)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          if (cap[m][hi] < 0) continue;
          f16 *dst = p.cap_logits + static_cast<int64_t>(cap[m][hi]) * p.cap_stride + base + 2 * t4;
#pragma unroll
          for (int n = 0; n < kNk / 8; ++n)
            *reinterpret_cast<__half2 *>(dst + n * 8) =
                __floats2half2_rn(s[m][n][2 * hi] * logit_scale, s[m][n][2 * hi + 1] * logit_scale);
        }
      float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
      for (int n = 0; n < kNk / 8; ++n) {
        const int key = base + n * 8 + 2 * t4;
        if (masked) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int pos = key + (e & 1);
            // A vector sees keys up to its row's position (computed only here,
            // in the range's last steps, to save registers).
            const bool seen = pos < end && pos <= start_pos + (m * 16 + g + 8 * (e >> 1)) / group;
            if (!seen) s[m][n][e] = -INFINITY;
          }
        }
        if (capture && !whole_capture)  // captured rows are dense: key index = position
#pragma unroll
          for (int hi = 0; hi < 2; ++hi) {
            if (cap[m][hi] < 0) continue;
            f16 *dst = p.cap_logits + static_cast<int64_t>(cap[m][hi]) * p.cap_stride;
            const float a = s[m][n][2 * hi], b = s[m][n][2 * hi + 1];
            const bool lo_ok = a != -INFINITY && key < n_cand;  // -inf: masked here
            const bool hi_ok = b != -INFINITY && key + 1 < n_cand;
            if (lo_ok && hi_ok && cap_pairs) {
              *reinterpret_cast<__half2 *>(dst + key) =
                  __floats2half2_rn(a * logit_scale, b * logit_scale);
            } else {
              if (lo_ok) dst[key] = __float2half_rn(a * logit_scale);
              if (hi_ok) dst[key + 1] = __float2half_rn(b * logit_scale);
            }
          }
        mx_lo = fmaxf(mx_lo, fmaxf(s[m][n][0], s[m][n][1]));
        mx_hi = fmaxf(mx_hi, fmaxf(s[m][n][2], s[m][n][3]));
      }
      lazy_softmax<kNk, HD>(s[m], mx_lo, mx_hi, scale, m_lo[m], m_hi[m], l_lo[m], l_hi[m], o[m]);
    }
    if constexpr (FP8)
      accumulate_pv_fp8<MT, HD, kStride>(s, o, vt, row_scale, v_unit, v_inv, lane);
    else
      accumulate_pv<MT, kNk, HD, kStride>(s, o, vt, lane);
  }
  if constexpr (FP8)  // back to the values' units
#pragma unroll
    for (int m = 0; m < MT; ++m) scale_rows<HD>(o[m], v_unit, v_unit);
  cp_async_wait<0>();  // only empty groups remain
  __syncthreads();     // every warp is done with its stages: they become the combination space

  float *o_s = reinterpret_cast<float *>(smem);    // [warp][vec][kOStride]
  float *m_s = o_s + kWarps * kVec * L::kOStride;  // [warp][vec]
  float *l_s = m_s + kWarps * kVec;                // [warp][vec]
#pragma unroll
  for (int m = 0; m < MT; ++m)
    store_tile_state<HD, L::kOStride>(o[m], m_lo[m], m_hi[m], quad_sum(l_lo[m]), quad_sum(l_hi[m]),
                                      warp * kVec + m * 16, o_s, m_s, l_s);
  __syncthreads();

  // Combine the warps' key slices of each (vector, 8-dim chunk): weights 2^(m_w - m).
  for (int i = threadIdx.x; i < (v_last + 1) * kPieces; i += kThreads) {
    const int v = i / kPieces, c = i % kPieces;
    float m, l, acc[8];
    combine_slices<kWarps, L::kOStride>(
        o_s, m_s, l_s, [&](int w) { return w * kVec + v; }, c, acc, m, l);
    write_verify_piece<HD>(p, row_start + v / group, kvh * group + v % group, c, acc, m, l);
  }
  if (p.n_splits > 1 && p.split_counters != nullptr)
    merge_splits<HD, kVec>(p, v_last + 1, row_start, group, kvh, reinterpret_cast<float *>(smem));
}

template <int HD, int MT>
cudaError_t launch(const PagedAttentionParams &p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(int64_t{p.n_seqs} * p.n_kv_heads), 1u,
                  static_cast<unsigned>(p.n_splits));
  const size_t smem = WarpsLayout<HD, MT>::smem;
  const bool step_pages = p.page_size % kNk == 0, fp8 = p.k_scale != nullptr;
  if (step_pages && fp8)
    return launch_kernel(verify_warps_kernel<HD, MT, true, true>, grid, kThreads, smem, stream, p);
  if (step_pages)
    return launch_kernel(verify_warps_kernel<HD, MT, true, false>, grid, kThreads, smem, stream, p);
  if (fp8)
    return launch_kernel(verify_warps_kernel<HD, MT, false, true>, grid, kThreads, smem, stream, p);
  return launch_kernel(verify_warps_kernel<HD, MT, false, false>, grid, kThreads, smem, stream, p);
}

template <int HD, int MT>
cudaError_t set_smem() {
  using L = WarpsLayout<HD, MT>;
  static_assert(L::smem * kMinBlocks + 2048 <= 228 * 1024, "kMinBlocks blocks per multiprocessor");
  static_assert(sizeof(float) * L::kVec * (64 + 1) <= L::work_bytes, "merge_splits' scratch");
  const int bytes = static_cast<int>(L::smem);
  const auto attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
  for (cudaError_t e :
       {cudaFuncSetAttribute(verify_warps_kernel<HD, MT, true, false>, attr, bytes),
        cudaFuncSetAttribute(verify_warps_kernel<HD, MT, false, false>, attr, bytes),
        cudaFuncSetAttribute(verify_warps_kernel<HD, MT, true, true>, attr, bytes),
        cudaFuncSetAttribute(verify_warps_kernel<HD, MT, false, true>, attr, bytes)})
    if (e != cudaSuccess) return e;
  return cudaSuccess;
}

// The query vectors of the longest verified sequence.
int64_t verify_vectors(const PagedAttentionParams &p) {
  return int64_t{std::min(p.max_rows_per_seq, p.verify_max_rows)} * (p.n_heads / p.n_kv_heads);
}

}  // namespace

bool verify_attention_warps_applies(const PagedAttentionParams &p) {
  static const bool enabled = variant_enabled("VEGAS_CUDA_VERIFY_WARPS");
  return enabled && p.head_dim == 64 && p.n_kv_heads > 0 && p.n_heads % p.n_kv_heads == 0 &&
         verify_vectors(p) <= kMaxVectors;
}

bool verify_attention_merges_splits(const PagedAttentionParams &p) {
  return verify_attention_warps_applies(p) && p.split_counters != nullptr;
}

int32_t verify_attention_resident_blocks(const PagedAttentionParams &p) {
  return verify_attention_warps_applies(p) ? kMinBlocks : kVerifyTiledResidentBlocks;
}

cudaError_t verify_attention_warps_init() {
  const cudaError_t e = set_smem<64, 1>();
  return e != cudaSuccess ? e : set_smem<64, 2>();
}

cudaError_t verify_attention_warps(const PagedAttentionParams &p, cudaStream_t stream) {
  if (p.n_seqs == 0 || p.max_rows_per_seq == 0) return cudaSuccess;
  if (!verify_attention_params_valid(p) || p.head_dim != 64 || verify_vectors(p) > kMaxVectors)
    return cudaErrorInvalidValue;
  return verify_vectors(p) <= 16 ? launch<64, 1>(p, stream) : launch<64, 2>(p, stream);
}

}  // namespace vegas::kernels
