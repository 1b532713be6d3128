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

#include "kv_fp8.cuh"
#include "mma_fragments.cuh"
#include "verify_attention.cuh"
#include "verify_warps_common.cuh"

namespace vegas::kernels {

namespace {

using namespace mma;
using namespace verify_warps;

constexpr int kNk = 16;     // keys per warp step
constexpr int kStages = 3;  // per warp: the step computed and two in flight

template <int HD, int MT>
struct WarpsLayout {
  static constexpr int kStride = HD + 8;       // bf16 per staged row: conflict-free ldmatrix
  static constexpr int kTile = kNk * kStride;  // one K (or V) stage of a warp
  static constexpr int kVec = 16 * MT;         // query vectors of a block
  static constexpr size_t tiles_bytes = sizeof(bf16) * kWarps * kStages * 2 * kTile;
  static constexpr size_t comb_bytes = Combination<HD, MT>::bytes;
  static constexpr size_t work_bytes = tiles_bytes > comb_bytes ? tiles_bytes : comb_bytes;
  static constexpr size_t q_bytes = sizeof(bf16) * kVec * kStride;
  static constexpr size_t smem = work_bytes + q_bytes;
};

// STEP_PAGES: pages hold a multiple of kNk slots (see look_up). bf16 caches
// only (verify_attention_warps_fp8.cu takes fp8 ones).
template <int HD, int MT, bool STEP_PAGES>
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
  const int g = lane >> 2;
  const int row_in = lane / kPieces, piece = lane % kPieces;
  bf16 *tiles = reinterpret_cast<bf16 *>(smem) + warp * kStages * 2 * L::kTile;
  bf16 *q_s = reinterpret_cast<bf16 *>(smem + L::work_bytes);

  if (!p.read_ahead) pdl_wait();  // else the wait follows the first copies
  VerifySlice vs;
  if (!verify_slice(p, &vs)) return;
  const int kvh = blockIdx.x % p.n_kv_heads;
  const int start_pos = vs.start_pos, begin = vs.begin, end = vs.end;
  const int32_t *table = vs.table;

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
  const int page_shift = page_shift_of(p.page_size);
  auto slot_of = [&](int key) { return page_slot(table, p.page_size, page_shift, key); };
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
        stage_piece<HD, false>(kt + row * kStride, piece, p.k_cache, p.k_scale, at, valid);
        stage_piece<HD, false>(vt + row * kStride, piece, p.v_cache, p.v_scale, at, valid);
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
        store_piece<HD, false>(kt + row * kStride, piece, p.k_cache, p.k_scale, at, true);
        store_piece<HD, false>(vt + row * kStride, piece, p.v_cache, p.v_scale, at, true);
      }
    }
  }
  // The query vectors (written by the previous kernel), zeros past v_last.
  for (int i = threadIdx.x; i < kVec * kPieces; i += kThreads) {
    const int v = i / kPieces, c = i % kPieces;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (v <= vs.v_last) {
      const int64_t row = vs.row_start + v / vs.group;
      val = *reinterpret_cast<const uint4 *>(
          p.q + (row * p.n_heads + kvh * vs.group + v % vs.group) * HD + c * 8);
    }
    *reinterpret_cast<uint4 *>(q_s + v * kStride + c * 8) = val;
  }
  __syncthreads();
  pdl_launch_dependents();

  const Capture<MT> cp = capture_rows<MT>(p, vs, kvh, g);
  SoftmaxState<MT, HD> st;
  st.clear();
  const float scale = p.scale * kLog2e;  // softmax in the log2 domain

  for (int i = 0; i < n_steps; ++i) {
    cp_async_wait<kStages - 2>();   // this lane's copies of step i
    __syncwarp();                   // ... and every lane's (and the step before is read)
    issue(i + kStages - 1, false);  // into the stage step i - 1 used
    look_up(i + kStages);
    bf16 *kt = tiles + (i % kStages) * 2 * L::kTile, *vt = kt + L::kTile;

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
        mma_bf16(s[m][0], a, b[0], b[1]);
        mma_bf16(s[m][1], a, b[2], b[3]);
      }
    }
    mask_capture_softmax<MT, HD>(p, vs, cp, first + i * kBlockStep, p.scale, scale, s, st);
    accumulate_pv<MT, kNk, HD, kStride>(s, st.o, vt, lane);
  }
  cp_async_wait<0>();  // only empty groups remain
  __syncthreads();     // every warp is done with its stages: they become the combination space
  finish_verify_warps<HD, MT>(p, vs, kvh, st, smem);
}

template <int HD, int MT>
cudaError_t launch(const PagedAttentionParams &p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(int64_t{p.n_seqs} * p.n_kv_heads), 1u,
                  static_cast<unsigned>(p.n_splits));
  const size_t smem = WarpsLayout<HD, MT>::smem;
  if (p.page_size % kNk == 0)
    return launch_kernel(verify_warps_kernel<HD, MT, true>, grid, kThreads, smem, stream, p);
  return launch_kernel(verify_warps_kernel<HD, MT, false>, grid, kThreads, smem, stream, p);
}

template <int HD, int MT>
cudaError_t set_smem() {
  using L = WarpsLayout<HD, MT>;
  static_assert(L::smem * kMinBlocks + 2048 <= 228 * 1024, "kMinBlocks blocks per multiprocessor");
  static_assert(sizeof(float) * L::kVec * (64 + 1) <= L::work_bytes, "merge_splits' scratch");
  const int bytes = static_cast<int>(L::smem);
  const auto attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
  for (cudaError_t e : {cudaFuncSetAttribute(verify_warps_kernel<HD, MT, true>, attr, bytes),
                        cudaFuncSetAttribute(verify_warps_kernel<HD, MT, false>, attr, bytes)})
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
         verify_vectors(p) <= kMaxVectors && p.seq_tree_off == nullptr;  // trees: the tiled kernel
}

bool verify_attention_merges_splits(const PagedAttentionParams &p) {
  return verify_attention_warps_applies(p) && p.split_counters != nullptr;
}

int32_t verify_attention_resident_blocks(const PagedAttentionParams &p) {
  return verify_attention_warps_applies(p) ? kMinBlocks : kVerifyTiledResidentBlocks;
}

cudaError_t verify_attention_warps_init() {
  for (cudaError_t e : {set_smem<64, 1>(), set_smem<64, 2>(), verify_warps::fp8_init()})
    if (e != cudaSuccess) return e;
  return cudaSuccess;
}

cudaError_t verify_attention_warps(const PagedAttentionParams &p, cudaStream_t stream) {
  if (p.n_seqs == 0 || p.max_rows_per_seq == 0) return cudaSuccess;
  if (!verify_attention_params_valid(p) || p.head_dim != 64 || verify_vectors(p) > kMaxVectors)
    return cudaErrorInvalidValue;
  if (p.k_scale != nullptr) return verify_warps::fp8_launch(p, verify_vectors(p), stream);
  return verify_vectors(p) <= 16 ? launch<64, 1>(p, stream) : launch<64, 2>(p, stream);
}

}  // namespace vegas::kernels
