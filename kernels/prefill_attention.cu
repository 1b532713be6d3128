#include "prefill_attention.cuh"

#include "mma_fragments.cuh"
#include "paged_tiles.cuh"

namespace vegas::kernels {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kN = 64;      // KV positions per tile
constexpr int kStages = 3;  // K/V tiles: the one computed and two in flight
constexpr float kLog2e = 1.4426950408889634f;

template <int HD>
struct Tiles {
  // 16-row M tiles per warp. At head_dim 128 each warp takes two, so every
  // K/V fragment it loads from shared memory feeds twice the mma work
  // (shared-memory traffic, not the tensor pipe, bounded the one-tile
  // version); its Q fragments are then reloaded per tile instead of held in
  // registers (two tiles' outputs and scores fill them).
  static constexpr int kMTiles = HD == 128 ? 2 : 1;
  static constexpr bool kQInRegisters = kMTiles == 1;
  static constexpr int kM = 16 * kMTiles * kWarps;  // query vectors per block
  static constexpr int kStride = HD + 8;  // padded bf16 row: ldmatrix rows hit distinct banks
  static constexpr size_t q_bytes = sizeof(bf16) * kM * kStride;
  static constexpr size_t tile_bytes = sizeof(bf16) * kN * kStride;
  static constexpr size_t smem = q_bytes + kStages * 2 * tile_bytes;  // Q, K[kStages], V[kStages]
  // Registers (the warp's outputs, HD f32 per vector) allow two blocks per
  // multiprocessor at head_dim 64, one at 128.
  static constexpr int kMinBlocks = HD <= 64 ? 2 : 1;
};

using namespace mma;

// Fragment layouts: see mma_fragments.cuh.
// FP8: fp8 caches (kv_fp8.cuh), each tile expanded in shared memory once landed.
template <int HD, bool FP8>
__global__ void __launch_bounds__(kThreads, Tiles<HD>::kMinBlocks)
    prefill_kernel(PagedAttentionParams p) {
  pdl_enter();
  using T = Tiles<HD>;
  constexpr int kStride = T::kStride, kM = T::kM, MT = T::kMTiles;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16 *q_s = reinterpret_cast<bf16 *>(smem);
  bf16 *k_s = reinterpret_cast<bf16 *>(smem + T::q_bytes);  // [kStages][kN][kStride]
  bf16 *v_s = k_s + kStages * kN * kStride;                 // [kStages][kN][kStride]

  const int seq = blockIdx.z, kvh = blockIdx.y;
  const int n_rows = p.seq_n_rows[seq];
  if (!defers_to_prefill(p, seq, n_rows)) return;
  const int group = p.n_heads / p.n_kv_heads;
  const int n_vec = n_rows * group;  // query vectors (row, head in group), row-major
  // The last vectors (latest rows, longest key ranges) go first.
  const int v0 = (gridDim.x - 1 - blockIdx.x) * kM;
  if (v0 >= n_vec) return;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int v_last = min(n_vec, v0 + kM) - 1;
  const int start_pos = p.seq_start_pos[seq];
  const int row_start = p.seq_row_start[seq];
  const int n_keys = start_pos + v_last / group + 1;  // keys [0, n_keys) reach every vector
  const int32_t *table = p.page_table + p.seq_page_off[seq];

  stage_query_vectors<HD, kStride, kThreads>(p, q_s, kM, v0, v_last, row_start, group, kvh);
  cp_async_commit();
  PagedKvTiles<HD, kN, kStride, kThreads, FP8> kv{p, table, kvh, {}};
  const int n_tiles = (n_keys + kN - 1) / kN;
  // Tiles 0 .. kStages - 2 in flight (Q's group first); later tiles are
  // issued in the loop, one per tile computed. Empty groups past the last
  // tile keep the count that cp_async_wait relies on.
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) {
    if (j < n_tiles) {
      kv.locate(j * kN, n_keys);
      kv.load(j, k_s, v_s);
    }
    cp_async_commit();
  }
  kv.locate((kStages - 1) * kN, n_keys);

  // This warp's MT x 16 vectors; in M tile m the thread owns vectors
  // w0 + 16 m + g and w0 + 16 m + g + 8.
  const int w0 = v0 + warp * 16 * MT;
  const bool active = w0 <= v_last;
  const int g = lane >> 2, t4 = lane & 3;
  const int warp_min_pos = start_pos + w0 / group;
  const int warp_max_pos = start_pos + min(w0 + 16 * MT - 1, v_last) / group;
  const bf16 *q_warp = q_s + (warp * 16 * MT + (lane & 15)) * kStride + (lane >> 4) * 8;

  cp_async_wait<kStages - 1>();  // Q (the oldest group) has landed, for every thread
  __syncthreads();
  uint32_t qf[T::kQInRegisters ? HD / 16 : 1][4];
  if constexpr (T::kQInRegisters) {
#pragma unroll
    for (int kc = 0; kc < HD / 16; ++kc) ldmatrix_x4(qf[kc], q_warp + kc * 16);
  }

  float o[MT][HD / 8][4];
  float m_run[MT][2], l_run[MT][2];  // running maxima and sums (l: this thread's columns)
#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int d = 0; d < HD / 8; ++d) o[m][d][0] = o[m][d][1] = o[m][d][2] = o[m][d][3] = 0.0f;
    m_run[m][0] = m_run[m][1] = -INFINITY;
    l_run[m][0] = l_run[m][1] = 0.0f;
  }
  const float scale = p.scale * kLog2e;  // scores in the log2 domain

  for (int j = 0; j < n_tiles; ++j) {
    cp_async_wait<kStages - 2>();  // this thread's copies of tile j (and of Q)
    // Every thread's copies of tile j have landed, and every warp is done
    // with tile j - 1, whose stage the copies issued next overwrite.
    __syncthreads();
    if (j + kStages - 1 < n_tiles) {
      kv.load((j + kStages - 1) % kStages, k_s, v_s);
      kv.locate((j + kStages) * kN, n_keys);
    }
    cp_async_commit();
    if constexpr (FP8) {
      kv.expand(j % kStages, k_s, v_s);
      __syncthreads();
    }
    const int ts = j * kN;
    if (active && ts <= warp_max_pos) {  // warp-uniform: tiles past the warp's rows are skipped
      const bf16 *kb = k_s + (j % kStages) * kN * kStride;
      const bf16 *vb = v_s + (j % kStages) * kN * kStride;

      // S = Q K^T: K rows are B's columns; one ldmatrix.x4 gives two 8-key
      // n-tiles, used by each M tile.
      float s[MT][kN / 8][4];
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < kN / 8; ++n) s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.0f;
#pragma unroll
      for (int kc = 0; kc < HD / 16; ++kc) {
        uint32_t a[MT][4];
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          if constexpr (T::kQInRegisters) {
#pragma unroll
            for (int r = 0; r < 4; ++r) a[m][r] = qf[kc][r];
          } else {
            ldmatrix_x4(a[m], q_warp + m * 16 * kStride + kc * 16);
          }
        }
#pragma unroll
        for (int n2 = 0; n2 < kN / 16; ++n2) {
          uint32_t b[4];
          ldmatrix_x4(b, kb + (n2 * 16 + (lane >> 4) * 8 + (lane & 7)) * kStride + kc * 16 +
                             ((lane >> 3) & 1) * 8);
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            mma_bf16(s[m][2 * n2], a[m], b[0], b[1]);
            mma_bf16(s[m][2 * n2 + 1], a[m], b[2], b[3]);
          }
        }
      }

      // Scale, mask the causal diagonal, online softmax.
      const bool diagonal = ts + kN - 1 > warp_min_pos;
#pragma unroll
      for (int m = 0; m < MT; ++m) {
#pragma unroll
        for (int n = 0; n < kN / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[m][n][e] *= scale;
        if (diagonal) {
          // Positions of the thread's two rows: found here, not held across
          // the loop (registers are short at head_dim 128).
          const int qpos_lo = start_pos + (w0 + 16 * m + g) / group;
          const int qpos_hi = start_pos + (w0 + 16 * m + g + 8) / group;
#pragma unroll
          for (int n = 0; n < kN / 8; ++n) {
            const int key = ts + n * 8 + 2 * t4;
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (key + (e & 1) > (e < 2 ? qpos_lo : qpos_hi)) s[m][n][e] = -INFINITY;
          }
        }
        float mx_lo = m_run[m][0], mx_hi = m_run[m][1];
#pragma unroll
        for (int n = 0; n < kN / 8; ++n) {
          mx_lo = fmaxf(mx_lo, fmaxf(s[m][n][0], s[m][n][1]));
          mx_hi = fmaxf(mx_hi, fmaxf(s[m][n][2], s[m][n][3]));
        }
        softmax_rescale<kN, HD>(s[m], mx_lo, mx_hi, m_run[m][0], m_run[m][1], l_run[m][0],
                                l_run[m][1], o[m]);
      }
      accumulate_pv<MT, kN, HD, kStride>(s, o, vb, lane);
    }
  }

#pragma unroll
  for (int m = 0; m < MT; ++m) {
    l_run[m][0] = quad_sum(l_run[m][0]);
    l_run[m][1] = quad_sum(l_run[m][1]);
  }
  if (!active) return;
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int gv = w0 + 16 * m + g + 8 * half;
      if (gv > v_last) continue;
      const float l = l_run[m][half];
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      const int64_t row = row_start + gv / group;
      bf16 *dst = p.out + (row * p.n_heads + kvh * group + gv % group) * HD + 2 * t4;
#pragma unroll
      for (int d = 0; d < HD / 8; ++d)
        *reinterpret_cast<__nv_bfloat162 *>(dst + d * 8) =
            __floats2bfloat162_rn(o[m][d][2 * half] * inv, o[m][d][2 * half + 1] * inv);
    }
}

template <int HD>
cudaError_t launch(const PagedAttentionParams &p, cudaStream_t stream) {
  const int group = p.n_heads / p.n_kv_heads;
  constexpr int kM = Tiles<HD>::kM;
  const int64_t tiles = (int64_t{p.max_rows_per_seq} * group + kM - 1) / kM;
  if (tiles > INT32_MAX) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(tiles), p.n_kv_heads, p.n_seqs);
  if (p.k_scale != nullptr)
    return launch_kernel(prefill_kernel<HD, true>, grid, kThreads, Tiles<HD>::smem, stream, p);
  return launch_kernel(prefill_kernel<HD, false>, grid, kThreads, Tiles<HD>::smem, stream, p);
}

template <int HD>
cudaError_t set_smem() {
  static_assert(Tiles<HD>::smem <= 227 * 1024, "shared memory per block");
  const cudaError_t e =
      cudaFuncSetAttribute(prefill_kernel<HD, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(Tiles<HD>::smem));
  return e != cudaSuccess ? e
                          : cudaFuncSetAttribute(prefill_kernel<HD, true>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(Tiles<HD>::smem));
}

}  // namespace

cudaError_t prefill_attention_init() {
  const cudaError_t e = set_smem<64>();
  return e != cudaSuccess ? e : set_smem<128>();
}

bool prefill_attention_supports(int32_t head_dim, int32_t group_size) {
  return (head_dim == 64 || head_dim == 128) && group_size >= 1;
}

cudaError_t prefill_attention(const PagedAttentionParams &p, cudaStream_t stream) {
  if (p.n_seqs == 0 || p.max_rows_per_seq == 0) return cudaSuccess;
  if (p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0 || p.prefill_min_rows <= 0 ||
      !prefill_attention_supports(p.head_dim, p.n_heads / p.n_kv_heads) ||
      p.cap_logits != nullptr || p.page_size <= 0 || p.n_seqs > 65535 || p.n_kv_heads > 65535)
    return cudaErrorInvalidValue;
  return p.head_dim == 64 ? launch<64>(p, stream) : launch<128>(p, stream);
}

}  // namespace vegas::kernels
