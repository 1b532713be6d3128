// decode_attention on the tensor cores, for head_dim 64 and GQA groups of 4
// and 8 (decode_attention_mma_applies says when it runs): the
// group's query heads are the rows of one m16 tile (the others zero), so a
// warp scores 16 keys with HD / 16 x 2 mma and adds P V with HD / 8 more,
// where the CUDA-core kernel spends ~700 dependent instructions per 16 keys
// (one row per sequence leaves one warp per scheduler: instruction latency,
// not bandwidth, set its speed). Each warp streams its own keys, 16 per step,
// through kStages buffers of its own shared memory filled by cp.async: while
// it computes one step the next kStages - 1 are in flight (a register
// prefetch of one step held ~4 KB per warp in flight, short of what the
// memory needs at ~16 warps per multiprocessor), and the loop has no block
// barrier. Splits, the in-kernel split merge, read-ahead before the PDL wait
// and the output contract are decode_attention's.
#include <cstdint>

#include "decode_attention.cuh"
#include "decode_common.cuh"
#include "decode_mma_common.cuh"
#include "kv_fp8.cuh"
#include "mma_fragments.cuh"
#include "timeline.cuh"

#if defined(VEGAS_TIMELINE)
VEGAS_TIMELINE_TABLE(tl_attn)
#endif

namespace vegas::kernels {

namespace {

using namespace mma;

constexpr int kWarps = kMmaWarps;
constexpr int kNk = 16;        // keys per warp step
constexpr int kStages = 3;     // per warp: the step computed and two in flight
constexpr int kMinBlocks = 2;  // per multiprocessor: 110 KB of stages each
// Sparse draft steps of few (sequence, KV head) pairs that take one split
// (or more than a cluster holds; sparse_cluster_form takes the others): one
// block per multiprocessor with kDeepStages stages a warp, so that a block's share of a
// selected set (kSparseSplitKeys keys) is requested in full before the PDL
// wait. With three stages their few steps ran at the pace of the memory
// latency, one look-up and copy in flight behind each computed step. At more
// pairs the shallow stages' second block per multiprocessor keeps the memory
// as busy, and the deep stages measured slower (README, session 27).
constexpr int kDeepStages = 6;
constexpr int kDeepMaxPairs = 32;
constexpr int kSparseSplitKeys = (kDeepStages - 1) * kMmaWarps * kNk;
constexpr int kShallowSparseSplitKeys = 256;
// Sparse steps of few pairs cut their sets into splits of this many keys (up
// to kMaxClusterSplits) that a cluster merges (sparse_cluster_form).
constexpr int kClusterSparseSplitKeys = 160;
// ... and on fp8 caches, one block step of their kernel (8 warps x 32 keys):
// 160-key splits left most of its warps idle at 16K (README, session 32).
constexpr int kFp8ClusterSparseSplitKeys = 256;
constexpr float kLog2e = 1.4426950408889634f;

template <int HD, int GROUP, int STAGES>
struct MmaLayout {
  static constexpr int kStride = HD + 8;  // bf16 per staged row: conflict-free ldmatrix
  static constexpr int kTile = kNk * kStride;
  using Red = MmaWarpStates<HD, GROUP>;
  // Every warp's K and V stages, reused for the reduction after the loop.
  static constexpr size_t kTileBytes = size_t{kWarps} * STAGES * 2 * kTile * sizeof(bf16);
  static constexpr size_t kBytes = sizeof(Red) > kTileBytes ? sizeof(Red) : kTileBytes;
};

// CLUSTER: the launch's clusters are the splits of one (sequence, KV head),
// merged through distributed shared memory (decode_finish_cluster). STAGES:
// kStages, or kDeepStages for sparse steps (one block per multiprocessor).
// bf16 caches; fp8 ones go to decode_attention_mma_fp8.cu.
template <int HD, int GROUP, bool CLUSTER, int STAGES>
__global__ void __launch_bounds__(kWarps * 32, STAGES == kStages ? kMinBlocks : 1)
    decode_mma_kernel(PagedAttentionParams p) {
  using Layout = MmaLayout<HD, GROUP, STAGES>;
  constexpr int kStride = Layout::kStride;
  constexpr int kPieces = HD / 8;             // 16-byte pieces of a key row
  constexpr int kRowsPerLoad = 32 / kPieces;  // key rows one warp copy covers
  constexpr int kLoads = kNk / kRowsPerLoad;  // copies per lane per step, for K and for V
  static_assert(GROUP <= 8, "the group's heads are rows 0..7 of the m16 tile");
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t4 = lane & 3;
  const int row_in = lane / kPieces, piece = lane % kPieces;
  const int seq = blockIdx.x / p.n_kv_heads, kvh = blockIdx.x % p.n_kv_heads;
  bf16 *tiles = reinterpret_cast<bf16 *>(smem) + warp * STAGES * 2 * Layout::kTile;
  const bool tl = p.layer == p.n_layers - 1;  // the timeline's launch
  VEGAS_MARK(tl_attn, 0, tl);

  if (!p.read_ahead) pdl_wait();  // else the wait follows the first copies
  DecodeSlice sl;
  if (!decode_slice(p, seq, &sl)) return;  // graph padding: no row
  VEGAS_MARK(tl_attn, 6, tl && sl.n_keys >= 0);  // the indices and the record's head are read
  const int64_t row_stride = static_cast<int64_t>(p.n_kv_heads) * HD;
  const int64_t head_off = static_cast<int64_t>(kvh) * HD + piece * 8;
  constexpr int kBlockStep = kWarps * kNk;
  const int first = sl.begin + warp * kNk;  // this warp's steps: first + i * kBlockStep
  const int n_steps = first < sl.end ? (sl.end - first + kBlockStep - 1) / kBlockStep : 0;
  // With read-ahead, every key but the row's own (n_keys - 1, written by the
  // previous kernel) is final before the PDL wait (PagedAttentionParams::read_ahead).
  const int own = p.read_ahead ? sl.n_keys - 1 : -1;
  // This lane's rows of step i: i * kBlockStep + r * kRowsPerLoad + row_in.
  // Their cache slots (page-table reads, and record reads for sparse rows)
  // are looked up one issue ahead, so their latency passes during a step's
  // compute instead of stalling the issue that needs them.
  auto key_of = [&](int i, int r) { return first + i * kBlockStep + r * kRowsPerLoad + row_in; };
  int64_t slots[kLoads];
  auto look_up = [&](int i) {
#pragma unroll
    for (int r = 0; r < kLoads; ++r) slots[r] = i < n_steps ? sl.slot(p, key_of(i, r)) : -1;
  };
  // Step i (slots looked up) into its stage, zeros past the slice (which P V
  // must see finite); before the wait, `skip` (the own key) is left out.
  auto issue = [&](int i, int skip) {
    if (i < n_steps) {
      bf16 *kt = tiles + (i % STAGES) * 2 * Layout::kTile, *vt = kt + Layout::kTile;
#pragma unroll
      for (int r = 0; r < kLoads; ++r) {
        const int row = r * kRowsPerLoad + row_in;
        if (key_of(i, r) == skip) continue;
        const int64_t at = (slots[r] < 0 ? 0 : slots[r]) * row_stride + head_off;
        stage_piece<HD, false>(kt + row * kStride, piece, p.k_cache, nullptr, at, slots[r] >= 0);
        stage_piece<HD, false>(vt + row * kStride, piece, p.v_cache, nullptr, at, slots[r] >= 0);
      }
    }
    cp_async_commit();  // empty past the last step: the group count stays uniform
  };
  if constexpr (STAGES == kDeepStages || CLUSTER) {
    // Every look-up of the first STAGES steps before any copy (a copy
    // orders the loads after it): the positions, then the page-table entries.
    // Sparse steps only (the cluster form is theirs unless opted into): dense
    // steps measured 1.5-2% slower with it (README, session 28).
    int pos[STAGES][kLoads];
#pragma unroll
    for (int i = 0; i < STAGES; ++i)
#pragma unroll
      for (int r = 0; r < kLoads; ++r) pos[i][r] = i < n_steps ? sl.position(key_of(i, r)) : -1;
    int64_t ahead[STAGES][kLoads];
#pragma unroll
    for (int i = 0; i < STAGES; ++i)
#pragma unroll
      for (int r = 0; r < kLoads; ++r) ahead[i][r] = pos[i][r] < 0 ? -1 : sl.slot_of(p, pos[i][r]);
    VEGAS_MARK(tl_attn, 7, tl && ahead[0][0] != -2);  // the first slots are known
#pragma unroll
    for (int i = 0; i < STAGES; ++i) {
#pragma unroll
      for (int r = 0; r < kLoads; ++r) slots[r] = ahead[i][r];
      if (i < STAGES - 1) issue(i, own);
    }
  } else {
#pragma unroll
    for (int i = 0; i < STAGES - 1; ++i) {
      look_up(i);
      VEGAS_MARK(tl_attn, 7, tl && i == 0 && slots[0] != -2);  // the first slots are known
      issue(i, own);
    }
    look_up(STAGES - 1);
  }
  if (p.read_ahead) {
    VEGAS_MARK(tl_attn, 1, tl);
    pdl_wait();
    VEGAS_MARK(tl_attn, 2, tl);
    // The own key, if one of the steps above holds it: a plain copy now.
    const int i = (own - first) / kBlockStep, row = own - first - i * kBlockStep;
    if (own >= first && i < STAGES - 1 && i < n_steps && row < kNk &&
        row % kRowsPerLoad == row_in) {
      bf16 *kt = tiles + (i % STAGES) * 2 * Layout::kTile, *vt = kt + Layout::kTile;
      const int64_t slot = sl.slot(p, own);  // -1 past the slice: zeros
      const int64_t at = slot * row_stride + head_off;
      store_piece<HD, false>(kt + row * kStride, piece, p.k_cache, nullptr, at, slot >= 0);
      store_piece<HD, false>(vt + row * kStride, piece, p.v_cache, nullptr, at, slot >= 0);
    }
  }
  pdl_launch_dependents();

  // A fragments of Q: row r = query head kvh * GROUP + r for r < GROUP, else zero.
  uint32_t qf[HD / 16][4];
  {
    const bf16 *q = p.q + (static_cast<int64_t>(sl.row) * p.n_heads + kvh * GROUP + g) * HD;
#pragma unroll
    for (int kc = 0; kc < HD / 16; ++kc) {
      const bool real = g < GROUP;
      qf[kc][0] = real ? *reinterpret_cast<const uint32_t *>(q + kc * 16 + 2 * t4) : 0u;
      qf[kc][1] = 0u;  // row g + 8
      qf[kc][2] = real ? *reinterpret_cast<const uint32_t *>(q + kc * 16 + 8 + 2 * t4) : 0u;
      qf[kc][3] = 0u;
    }
  }
  float o[HD / 8][4];
#pragma unroll
  for (int d = 0; d < HD / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;
  const float scale = p.scale * kLog2e;  // scores in the log2 domain

  for (int i = 0; i < n_steps; ++i) {
    cp_async_wait<STAGES - 2>();  // this lane's copies of step i
    __syncwarp();                 // ... and every lane's (and the step before is read)
    VEGAS_MARK(tl_attn, 3, tl && i == 0);
    issue(i + STAGES - 1, -1);  // into the stage step i - 1 used
    look_up(i + STAGES);
    bf16 *kt = tiles + (i % STAGES) * 2 * Layout::kTile, *vt = kt + Layout::kTile;
    const int base = first + i * kBlockStep;

    // S = Q K^T: K rows are B's columns; one ldmatrix.x4 gives both 8-key n-tiles.
    float s[kNk / 8][4];
#pragma unroll
    for (int n = 0; n < kNk / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < HD / 16; ++kc) {
      uint32_t b[4];
      ldmatrix_x4(b,
                  kt + ((lane >> 4) * 8 + (lane & 7)) * kStride + kc * 16 + ((lane >> 3) & 1) * 8);
      mma_bf16(s[0], qf[kc], b[0], b[1]);
      mma_bf16(s[1], qf[kc], b[2], b[3]);
    }
    float mx_lo = m_lo, mx_hi = m_hi;
#pragma unroll
    for (int n = 0; n < kNk / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = n * 8 + 2 * t4 + (e & 1), key = base + row;
        s[n][e] = key < sl.end ? s[n][e] * scale : -INFINITY;
      }
      mx_lo = fmaxf(mx_lo, fmaxf(s[n][0], s[n][1]));
      mx_hi = fmaxf(mx_hi, fmaxf(s[n][2], s[n][3]));
    }
    online_softmax_pv<kNk, HD, kStride>(s, mx_lo, mx_hi, m_lo, m_hi, l_lo, l_hi, o, vt, lane);
  }
  VEGAS_MARK(tl_attn, 4, tl);
  cp_async_wait<0>();  // only empty groups remain; the tiles become the reduction space
  finish_mma_warps<HD, GROUP, CLUSTER>(p, sl.row, kvh, o, m_lo, l_lo, smem,
                                       [&](int k) { VEGAS_MARK(tl_attn, k, tl); });
  VEGAS_MARK(tl_attn, 5, tl);
}

// Sparse draft steps of few (sequence, KV head) pairs: short
// splits (kClusterSparseSplitKeys keys, two blocks a multiprocessor) merged in
// clusters. A block of the deep stages issues its whole share of the set
// before the PDL wait, and its issue, one multiprocessor's copies, outlasted
// the qkv kernel it waits on; more blocks share the copies, and the cluster
// merge costs no global round trip (README, session 29).
// VEGAS_CUDA_SPARSE_CLUSTER=0 keeps the deep stages (A/B).
// fp8 caches too, in splits of kFp8ClusterSparseSplitKeys (session 32);
// VEGAS_CUDA_SPARSE_CLUSTER_FP8=0 keeps their global merge (A/B).
bool sparse_cluster_form(const PagedAttentionParams &p) {
  static const bool enabled = variant_enabled("VEGAS_CUDA_SPARSE_CLUSTER");
  static const bool fp8 = variant_enabled("VEGAS_CUDA_SPARSE_CLUSTER_FP8");
  return enabled && p.sparse_step && (p.k_scale == nullptr || fp8) &&
         p.n_seqs * p.n_kv_heads <= kDeepMaxPairs;
}

// The split merge through clusters (decode_finish_cluster) instead of
// partial results in global memory, a counter and the last block's L2 reads:
// for 2 .. kMaxClusterSplits splits merged in the kernel. Correct (the gpu
// tests pass with it) but slower for dense steps (22m 8K x 16 vanilla step
// 0.327 -> 0.444 ms), so there off unless VEGAS_CUDA_CLUSTER_MERGE=1;
// sparse steps of few pairs take it (sparse_cluster_form).
bool cluster_merge_applies(const PagedAttentionParams &p) {
  static const bool enabled = variant_opted_in("VEGAS_CUDA_CLUSTER_MERGE");
  return (enabled || sparse_cluster_form(p)) && p.split_counters != nullptr && p.n_splits >= 2 &&
         p.n_splits <= kMaxClusterSplits;
}

// Sparse steps of few pairs on bf16 caches take the deep stages
// (VEGAS_CUDA_SPARSE_DEEP=0: the usual three, A/B timing); cluster merges
// keep three.
bool deep_applies(const PagedAttentionParams &p) {
  static const bool enabled = variant_enabled("VEGAS_CUDA_SPARSE_DEEP");
  return enabled && p.sparse_step && p.k_scale == nullptr &&
         p.n_seqs * p.n_kv_heads <= kDeepMaxPairs && !cluster_merge_applies(p);
}

template <int HD, int GROUP>
cudaError_t launch(const PagedAttentionParams &p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.n_seqs * p.n_kv_heads),
                  static_cast<unsigned>(p.n_splits));
  if (cluster_merge_applies(p))
    return launch_kernel_cluster(decode_mma_kernel<HD, GROUP, true, kStages>, grid, kWarps * 32,
                                 MmaLayout<HD, GROUP, kStages>::kBytes, stream,
                                 dim3(1, static_cast<unsigned>(p.n_splits), 1), p);
  if (deep_applies(p))
    return launch_kernel(decode_mma_kernel<HD, GROUP, false, kDeepStages>, grid, kWarps * 32,
                         MmaLayout<HD, GROUP, kDeepStages>::kBytes, stream, p);
  return launch_kernel(decode_mma_kernel<HD, GROUP, false, kStages>, grid, kWarps * 32,
                       MmaLayout<HD, GROUP, kStages>::kBytes, stream, p);
}

template <int HD, int GROUP>
cudaError_t set_smem() {
  const int bytes = static_cast<int>(MmaLayout<HD, GROUP, kStages>::kBytes);
  const int deep = static_cast<int>(MmaLayout<HD, GROUP, kDeepStages>::kBytes);
  for (cudaError_t e : {cudaFuncSetAttribute(decode_mma_kernel<HD, GROUP, false, kStages>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
                        cudaFuncSetAttribute(decode_mma_kernel<HD, GROUP, true, kStages>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
                        cudaFuncSetAttribute(decode_mma_kernel<HD, GROUP, false, kDeepStages>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, deep)})
    if (e != cudaSuccess) return e;
  return cudaSuccess;
}

template <int HD>
cudaError_t launch_group(const PagedAttentionParams &p, cudaStream_t stream) {
  if (p.k_scale != nullptr) return decode_attention_mma_fp8(p, cluster_merge_applies(p), stream);
  if (p.n_heads / p.n_kv_heads == 4) return launch<HD, 4>(p, stream);
  return launch<HD, 8>(p, stream);
}

}  // namespace

bool decode_attention_mma_applies(const PagedAttentionParams &p) {
  static const bool enabled = variant_enabled("VEGAS_CUDA_DECODE_MMA");
  if (!enabled || !decode_attention_applies(p)) return false;
  const int group = p.n_heads / p.n_kv_heads;
  // Few (sequence, KV head) pairs leave one warp per scheduler, where the
  // CUDA-core kernel's instruction latency shows (H100, 22m: 2K x 1 step
  // 0.234 -> 0.218 ms, 8K x 16 0.494 -> 0.474 ms); at 8K x 64 (128 pairs) the
  // CUDA-core kernel stays ahead (1.051-1.053 against 1.062-1.063 ms, with
  // this kernel's cp.async stages). Head_dim 128 is not instantiated: the
  // earlier register-prefetch version needed 212 registers there and took
  // Qwen3-8B shapes at 32K x 4 from 85% to 64% of the floor; the staged
  // version has not been measured at 128.
  // Sparse drafting reads a few hundred keys a sequence: there the tensor-core
  // kernel stays ahead up to 128 pairs (H100, 22m, 8K x 64 draft step 0.291 ->
  // 0.274 ms), where dense steps lost.
  // fp8 caches: the CUDA-core kernel's per-element expansion made its 8K x 64
  // step slower than with bf16, so this kernel keeps those batches too.
  return p.head_dim == 64 && (group == 4 || group == 8) &&
         p.n_seqs * p.n_kv_heads <= (p.sparse_step || p.k_scale != nullptr ? 128 : 64);
}

int32_t decode_attention_mma_resident_blocks(const PagedAttentionParams &p) {
  return deep_applies(p) ? 1 : kMinBlocks;
}

int32_t decode_attention_sparse_split_keys(const PagedAttentionParams &p) {
  if (!decode_attention_mma_applies(p)) return kShallowSparseSplitKeys;
  if (sparse_cluster_form(p))
    return p.k_scale != nullptr ? kFp8ClusterSparseSplitKeys : kClusterSparseSplitKeys;
  return deep_applies(p) ? kSparseSplitKeys : kShallowSparseSplitKeys;
}

int32_t decode_attention_mma_max_splits(const PagedAttentionParams &p) {
  return sparse_cluster_form(p) ? kMaxClusterSplits : 64;
}

cudaError_t decode_attention_mma_init() {
  for (cudaError_t e : {set_smem<64, 4>(), set_smem<64, 8>(), decode_attention_mma_fp8_init()})
    if (e != cudaSuccess) return e;
  return cudaSuccess;
}

cudaError_t decode_attention_mma(const PagedAttentionParams &p, cudaStream_t stream) {
  if (p.head_dim != 64) return cudaErrorInvalidValue;
  return launch_group<64>(p, stream);
}

}  // namespace vegas::kernels
