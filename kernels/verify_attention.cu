#include "verify_attention.cuh"

#include <algorithm>
#include <climits>

#include "mma_fragments.cuh"
#include "paged_tiles.cuh"
#include "tree_mask.cuh"
#include "verify_output.cuh"

namespace vegas::kernels {

namespace {

using namespace mma;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kN = 64;  // KV positions per shared-memory tile
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// MT: 16-vector M tiles per block (1, 2 or 4); the warps split each K/V tile
// into kSlices key slices of kNk keys, warp w taking M tile w % MT and slice w / MT.
template <int HD, int MT>
struct VTiles {
  static constexpr int kStride = HD + 8;  // padded bf16 row: ldmatrix rows hit distinct banks
  static constexpr int kChunks = HD / 8;  // 16-byte chunks per row
  static constexpr int kVec = 16 * MT;    // query vectors per block
  static constexpr int kSlices = kWarps / MT;
  static constexpr int kNk = kN / kSlices;  // keys per warp per tile: 16, 32 or 64
  static constexpr size_t q_bytes = sizeof(bf16) * kVec * kStride;
  static constexpr size_t kv_bytes = sizeof(bf16) * 2 * 2 * kN * kStride;  // K[2], V[2]
  // The key slices' results, combined after the last tile in the K/V space:
  // unnormalised outputs [warp][16][kOStride], then m and l [warp][16].
  static constexpr int kOStride = HD + 8;
  static constexpr size_t comb_bytes = sizeof(float) * kWarps * 16 * (kOStride + 2);
  static constexpr size_t smem = q_bytes + kv_bytes;
  static_assert(comb_bytes <= kv_bytes, "the combination reuses the K/V tiles");
  static_assert(kWarps % MT == 0 && kNk % 16 == 0, "whole 16-key mma steps per warp");
  // Registers: up to 128 per thread at head_dim 64, 255 at 128.
  static constexpr int kMinBlocks = HD <= 64 ? 4 : 2;
};

// FP8: fp8 caches (kv_fp8.cuh), each tile expanded in shared memory once landed.
// TREE: some sequence is a whole token tree (a step with seq_tree_off; its
// own instance, so chains keep their registers).
template <int HD, int MT, bool FP8, bool TREE>
__global__ void __launch_bounds__(kThreads, VTiles<HD, MT>::kMinBlocks)
    verify_kernel(PagedAttentionParams p) {
  pdl_enter();
  using T = VTiles<HD, MT>;
  constexpr int kStride = T::kStride, kChunks = T::kChunks, kVec = T::kVec, kNk = T::kNk;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16 *q_s = reinterpret_cast<bf16 *>(smem);
  bf16 *k_s = reinterpret_cast<bf16 *>(smem + T::q_bytes);  // [2][kN][kStride]
  bf16 *v_s = k_s + 2 * kN * kStride;                       // [2][kN][kStride]

  const int seq = blockIdx.x / p.n_kv_heads, kvh = blockIdx.x % p.n_kv_heads;
  const int n_rows = p.seq_n_rows[seq];
  if (!defers_to_verify(p, seq, n_rows)) return;
  const int group = p.n_heads / p.n_kv_heads;
  const int n_vec = n_rows * group;  // query vectors (row, head in group), row-major
  const int v0 = blockIdx.y * kVec;
  if (v0 >= n_vec) return;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int v_last = min(n_vec, v0 + kVec) - 1;
  const int start_pos = p.seq_start_pos[seq];
  const int row_start = p.seq_row_start[seq];
  const int32_t *table = p.page_table + p.seq_page_off[seq];
  // This block's key range: split z of keys [0, n_keys), in whole tiles (the
  // paged kernel's rounding); vectors that see none of it report lse -inf.
  const int n_keys = start_pos + v_last / group + 1;
  const int per_split = ((n_keys + p.n_splits - 1) / p.n_splits + kN - 1) / kN * kN;
  const int begin = static_cast<int>(
      min(static_cast<int64_t>(n_keys), static_cast<int64_t>(blockIdx.z) * per_split));
  const int end = min(n_keys, begin + per_split);
  const int n_cand = p.cap_logits == nullptr ? 0 : p.seq_cap_cand[seq];

  stage_query_vectors<HD, kStride, kThreads>(p, q_s, kVec, v0, v_last, row_start, group, kvh);
  cp_async_commit();
  PagedKvTiles<HD, kN, kStride, kThreads, FP8> kv{p, table, kvh, {}};
  const int n_tiles = (end - begin + kN - 1) / kN;
  if (n_tiles > 0) {
    kv.locate(begin, end);
    kv.load(0, k_s, v_s);
  }
  cp_async_commit();
  kv.locate(begin + kN, end);
  cp_async_wait<1>();  // Q has landed; tile 0 may still be in flight
  __syncthreads();

  // This warp's M tile (16 vectors from w0) and key slice; the thread owns
  // vectors w0 + g and w0 + g + 8.
  const int mt = warp % MT, slice = warp / MT;
  const int w0 = v0 + mt * 16;
  const bool active = w0 <= v_last;
  const int g = lane >> 2, t4 = lane & 3;
  const int qpos_lo = start_pos + (w0 + g) / group, qpos_hi = start_pos + (w0 + g + 8) / group;
  const int warp_min_pos = start_pos + w0 / group;
  const int warp_max_pos = start_pos + min(w0 + 15, v_last) / group;
  // A whole token tree (defers_to_verify): its rows see a key from start_pos
  // on only where their ancestor mask has its bit (paged_attention.cuh), so
  // the warp masks from start_pos, not just past its first row's position.
  const int tree_off = TREE ? p.seq_tree_off[seq] : -1;
  const int mask_from = tree_off >= 0 ? start_pos : warp_min_pos + 1;

  // Score capture: where each of the thread's two vectors writes its scores (null = nowhere).
  f16 *cap_lo = nullptr, *cap_hi = nullptr;
  if (p.cap_logits != nullptr && active) {
    auto cap_row = [&](int gv) -> f16 * {
      if (gv > v_last) return nullptr;
      const int slot = p.row_cap_slot[row_start + gv / group];
      if (slot < 0) return nullptr;
      return p.cap_logits +
             (static_cast<int64_t>(slot) * p.n_heads + kvh * group + gv % group) * p.cap_stride;
    };
    cap_lo = cap_row(w0 + g);
    cap_hi = cap_row(w0 + g + 8);
  }
  const bool warp_captures = __any_sync(0xffffffffu, cap_lo != nullptr || cap_hi != nullptr);
  // A thread's keys come in pairs (2 t4, 2 t4 + 1; even positions: tiles start
  // at multiples of kN), stored as one half2 where the rows are 4-byte aligned.
  const bool cap_pairs = (p.cap_stride & 1) == 0;

  uint32_t qf[HD / 16][4];
#pragma unroll
  for (int kc = 0; kc < HD / 16; ++kc)
    ldmatrix_x4(qf[kc], q_s + (mt * 16 + (lane & 15)) * kStride + kc * 16 + (lane >> 4) * 8);

  float o[HD / 8][4];
#pragma unroll
  for (int d = 0; d < HD / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;  // l: this thread's columns
  const float scale = p.scale * kLog2e;                                // scores in the log2 domain

  for (int j = 0; j < n_tiles; ++j) {
    const int ts = begin + j * kN;
    if (j + 1 < n_tiles) {
      kv.load((j + 1) & 1, k_s, v_s);
      cp_async_commit();
      kv.locate(ts + 2 * kN, end);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if constexpr (FP8) {
      kv.expand(j & 1, k_s, v_s);
      __syncthreads();
    }
    const int ks = ts + slice * kNk;  // this warp's first key
    // Warp-uniform: slices past the range or past the warp's rows are skipped.
    if (active && ks < end && ks <= warp_max_pos) {
      const bf16 *kb = k_s + (j & 1) * kN * kStride + slice * kNk * kStride;
      const bf16 *vb = v_s + (j & 1) * kN * kStride + slice * kNk * kStride;

      // S = Q K^T: K rows are B's columns; one ldmatrix.x4 gives two 8-key n-tiles.
      float s[kNk / 8][4];
#pragma unroll
      for (int n = 0; n < kNk / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int kc = 0; kc < HD / 16; ++kc)
#pragma unroll
        for (int n2 = 0; n2 < kNk / 16; ++n2) {
          uint32_t b[4];
          ldmatrix_x4(b, kb + (n2 * 16 + (lane >> 4) * 8 + (lane & 7)) * kStride + kc * 16 +
                             ((lane >> 3) & 1) * 8);
          mma_bf16(s[2 * n2], qf[kc], b[0], b[1]);
          mma_bf16(s[2 * n2 + 1], qf[kc], b[2], b[3]);
        }

      // Scale, mask (causal diagonal, end of the range), capture, online softmax.
      const bool masked = ks + kNk - 1 >= mask_from || ks + kNk > end;
      const bool capture = warp_captures && ks < n_cand;
      float mx_lo = m_lo, mx_hi = m_hi;
#pragma unroll
      for (int n = 0; n < kNk / 8; ++n) {
        const int key = ks + n * 8 + 2 * t4;
        bool seen[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int pos = key + (e & 1);
          seen[e] = !masked || (pos < end && pos <= (e < 2 ? qpos_lo : qpos_hi));
          if (TREE && seen[e] && tree_off >= 0 && pos >= start_pos)  // the row's ancestor mask
            seen[e] = tree_row_sees(p.tree_data + tree_off,
                                    min((e < 2 ? qpos_lo : qpos_hi) - start_pos, n_rows - 1),
                                    pos - start_pos);
          s[n][e] *= scale;
        }
        if (capture)  // captured rows are dense: key index = position
#pragma unroll
          for (int hi = 0; hi < 2; ++hi) {
            f16 *dst = hi ? cap_hi : cap_lo;
            if (dst == nullptr) continue;
            const bool first = seen[2 * hi] && key < n_cand;
            const bool second = seen[2 * hi + 1] && key + 1 < n_cand;
            const float a = s[n][2 * hi] * kLn2, b = s[n][2 * hi + 1] * kLn2;
            if (first && second && cap_pairs) {
              *reinterpret_cast<__half2 *>(dst + key) = __floats2half2_rn(a, b);
            } else {
              if (first) dst[key] = __float2half_rn(a);
              if (second) dst[key + 1] = __float2half_rn(b);
            }
          }
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = seen[e] ? s[n][e] : -INFINITY;
        mx_lo = fmaxf(mx_lo, fmaxf(s[n][0], s[n][1]));
        mx_hi = fmaxf(mx_hi, fmaxf(s[n][2], s[n][3]));
      }
      online_softmax_pv<kNk, HD, kStride>(s, mx_lo, mx_hi, m_lo, m_hi, l_lo, l_hi, o, vb, lane);
    }
    __syncthreads();  // the next iteration's load overwrites this stage
  }
  cp_async_wait<0>();  // no copy may land in the K/V space reused below
  __syncthreads();

  // Every warp leaves its slice's state in shared memory (K/V space, free now).
  l_lo = quad_sum(l_lo);
  l_hi = quad_sum(l_hi);
  float *o_s = reinterpret_cast<float *>(k_s);   // [warp][16][kOStride]
  float *m_s = o_s + kWarps * 16 * T::kOStride;  // [warp][16]
  float *l_s = m_s + kWarps * 16;                // [warp][16]
  store_tile_state<HD, T::kOStride>(o, m_lo, m_hi, l_lo, l_hi, warp * 16, o_s, m_s, l_s);
  __syncthreads();

  // Combine the slices of each (vector, 8-dim chunk): weights 2^(m_w - m).
  for (int i = tid; i < kVec * kChunks; i += kThreads) {
    const int v = i / kChunks, c = i % kChunks;
    const int gv = v0 + v;
    if (gv > v_last) continue;
    const int vt = v / 16, r = v % 16;  // M tile and row in it; its warps are vt + MT * slice
    float m, l, acc[8];
    combine_slices<T::kSlices, T::kOStride>(
        o_s, m_s, l_s, [&](int sl) { return (vt + MT * sl) * 16 + r; }, c, acc, m, l);
    write_verify_piece<HD>(p, row_start + gv / group, kvh * group + gv % group, c, acc, m, l);
  }
}

template <int HD, int MT>
cudaError_t launch(const PagedAttentionParams &p, int64_t vec_tiles, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(int64_t{p.n_seqs} * p.n_kv_heads),
                  static_cast<unsigned>(vec_tiles), static_cast<unsigned>(p.n_splits));
  const bool fp8 = p.k_scale != nullptr, tree = p.seq_tree_off != nullptr;
  auto kernel =
      fp8 ? (tree ? verify_kernel<HD, MT, true, true> : verify_kernel<HD, MT, true, false>)
          : (tree ? verify_kernel<HD, MT, false, true> : verify_kernel<HD, MT, false, false>);
  return launch_kernel(kernel, grid, kThreads, VTiles<HD, MT>::smem, stream, p);
}

// The vectors of the longest verified sequence choose the block size: the
// fewest 16-vector M tiles that hold them, at most four.
template <int HD>
cudaError_t launch_for(const PagedAttentionParams &p, cudaStream_t stream) {
  const int64_t vecs =
      int64_t{std::min(p.max_rows_per_seq, p.verify_max_rows)} * (p.n_heads / p.n_kv_heads);
  if (vecs <= 16) return launch<HD, 1>(p, 1, stream);
  if (vecs <= 32) return launch<HD, 2>(p, 1, stream);
  return launch<HD, 4>(p, (vecs + 63) / 64, stream);
}

template <int HD, int MT>
cudaError_t set_smem() {
  static_assert(VTiles<HD, MT>::smem <= 227 * 1024, "shared memory per block");
  cudaError_t e = cudaSuccess;
  for (auto kernel : {verify_kernel<HD, MT, false, false>, verify_kernel<HD, MT, true, false>,
                      verify_kernel<HD, MT, false, true>, verify_kernel<HD, MT, true, true>})
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(VTiles<HD, MT>::smem));
  return e;
}

template <int HD>
cudaError_t set_smem_all() {
  cudaError_t e = set_smem<HD, 1>();
  if (e == cudaSuccess) e = set_smem<HD, 2>();
  return e == cudaSuccess ? set_smem<HD, 4>() : e;
}

}  // namespace

cudaError_t verify_attention_init() {
  cudaError_t e = set_smem_all<64>();
  if (e == cudaSuccess) e = set_smem_all<128>();
  return e != cudaSuccess ? e : verify_attention_warps_init();
}

bool verify_attention_supports(int32_t head_dim, int32_t group_size) {
  return (head_dim == 64 || head_dim == 128) && group_size >= 1 && group_size <= 64;
}

bool verify_attention_params_valid(const PagedAttentionParams &p) {
  return !(p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0 || p.verify_max_rows < 2 ||
           p.verify_max_rows > kVerifyMaxRows ||
           !verify_attention_supports(p.head_dim, p.n_heads / p.n_kv_heads) || p.page_size <= 0 ||
           p.n_splits < 1 || p.n_splits > 64 || int64_t{p.n_seqs} * p.n_kv_heads > INT32_MAX ||
           (p.n_splits > 1 && (p.partial_out == nullptr || p.partial_lse == nullptr)) ||
           (p.cap_logits != nullptr &&
            (p.cap_lse == nullptr || p.row_cap_slot == nullptr || p.seq_cap_cand == nullptr)));
}

cudaError_t verify_attention_tiled(const PagedAttentionParams &p, cudaStream_t stream) {
  if (p.n_seqs == 0 || p.max_rows_per_seq == 0) return cudaSuccess;
  if (!verify_attention_params_valid(p)) return cudaErrorInvalidValue;
  return p.head_dim == 64 ? launch_for<64>(p, stream) : launch_for<128>(p, stream);
}

cudaError_t verify_attention(const PagedAttentionParams &p, cudaStream_t stream) {
  if (p.n_seqs == 0 || p.max_rows_per_seq == 0) return cudaSuccess;
  if (!verify_attention_params_valid(p)) return cudaErrorInvalidValue;
  return verify_attention_warps_applies(p) ? verify_attention_warps(p, stream)
                                           : verify_attention_tiled(p, stream);
}

}  // namespace vegas::kernels
