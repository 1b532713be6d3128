#include "prefill_attention.cuh"

#include "mma_fragments.cuh"
#include "paged_tiles.cuh"

namespace vegas::kernels {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kM = 16 * kWarps;  // query vectors per block: 16 per warp (one mma row tile)
constexpr int kN = 64;           // KV positions per tile
constexpr int kStages = 3;       // K/V tiles: the one computed and two in flight
constexpr float kLog2e = 1.4426950408889634f;

template <int HD>
struct Tiles {
  static constexpr int kStride = HD + 8;  // padded bf16 row: ldmatrix rows hit distinct banks
  static constexpr size_t q_bytes = sizeof(bf16) * kM * kStride;
  static constexpr size_t tile_bytes = sizeof(bf16) * kN * kStride;
  static constexpr size_t smem = q_bytes + kStages * 2 * tile_bytes;  // Q, K[kStages], V[kStages]
  // Registers (16 vectors x HD f32 outputs per warp) allow two blocks per
  // multiprocessor at head_dim 64, one at 128.
  static constexpr int kMinBlocks = HD <= 64 ? 2 : 1;
};

using namespace mma;

// Fragment layouts: see mma_fragments.cuh.
template <int HD>
__global__ void __launch_bounds__(kThreads, Tiles<HD>::kMinBlocks)
    prefill_kernel(PagedAttentionParams p) {
  pdl_enter();
  using T = Tiles<HD>;
  constexpr int kStride = T::kStride;
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
  PagedKvTiles<HD, kN, kStride, kThreads> kv{p, table, kvh, {}};
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

  // This warp's 16 vectors; the thread owns vectors w0 + g and w0 + g + 8.
  const int w0 = v0 + warp * 16;
  const bool active = w0 <= v_last;
  const int g = lane >> 2, t4 = lane & 3;
  const int qpos_lo = start_pos + (w0 + g) / group, qpos_hi = start_pos + (w0 + g + 8) / group;
  const int warp_min_pos = start_pos + w0 / group;
  const int warp_max_pos = start_pos + min(w0 + 15, v_last) / group;

  cp_async_wait<kStages - 1>();  // Q (the oldest group) has landed, for every thread
  __syncthreads();
  uint32_t qf[HD / 16][4];
#pragma unroll
  for (int kc = 0; kc < HD / 16; ++kc)
    ldmatrix_x4(qf[kc], q_s + (warp * 16 + (lane & 15)) * kStride + kc * 16 + (lane >> 4) * 8);

  float o[HD / 8][4];
#pragma unroll
  for (int d = 0; d < HD / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;  // l: this thread's columns
  const float scale = p.scale * kLog2e;                                // scores in the log2 domain

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
    const int ts = j * kN;
    if (active && ts <= warp_max_pos) {  // warp-uniform: tiles past the warp's rows are skipped
      const bf16 *kb = k_s + (j % kStages) * kN * kStride;
      const bf16 *vb = v_s + (j % kStages) * kN * kStride;

      // S = Q K^T: K rows are B's columns; one ldmatrix.x4 gives two 8-key n-tiles.
      float s[kN / 8][4];
#pragma unroll
      for (int n = 0; n < kN / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int kc = 0; kc < HD / 16; ++kc)
#pragma unroll
        for (int n2 = 0; n2 < kN / 16; ++n2) {
          uint32_t b[4];
          ldmatrix_x4(b, kb + (n2 * 16 + (lane >> 4) * 8 + (lane & 7)) * kStride + kc * 16 +
                             ((lane >> 3) & 1) * 8);
          mma_bf16(s[2 * n2], qf[kc], b[0], b[1]);
          mma_bf16(s[2 * n2 + 1], qf[kc], b[2], b[3]);
        }

      // Scale, mask the causal diagonal, online softmax.
      const bool diagonal = ts + kN - 1 > warp_min_pos;
      float mx_lo = m_lo, mx_hi = m_hi;
#pragma unroll
      for (int n = 0; n < kN / 8; ++n) {
        const int key = ts + n * 8 + 2 * t4;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[n][e] * scale;
          if (diagonal && key + (e & 1) > (e < 2 ? qpos_lo : qpos_hi)) x = -INFINITY;
          s[n][e] = x;
        }
        mx_lo = fmaxf(mx_lo, fmaxf(s[n][0], s[n][1]));
        mx_hi = fmaxf(mx_hi, fmaxf(s[n][2], s[n][3]));
      }
      online_softmax_pv<kN, HD, kStride>(s, mx_lo, mx_hi, m_lo, m_hi, l_lo, l_hi, o, vb, lane);
    }
  }

  l_lo = quad_sum(l_lo);
  l_hi = quad_sum(l_hi);
  if (!active) return;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int gv = w0 + g + 8 * half;
    if (gv > v_last) continue;
    const float l = half ? l_hi : l_lo;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int64_t row = row_start + gv / group;
    bf16 *dst = p.out + (row * p.n_heads + kvh * group + gv % group) * HD + 2 * t4;
#pragma unroll
    for (int d = 0; d < HD / 8; ++d)
      *reinterpret_cast<__nv_bfloat162 *>(dst + d * 8) =
          __floats2bfloat162_rn(o[d][2 * half] * inv, o[d][2 * half + 1] * inv);
  }
}

template <int HD>
cudaError_t launch(const PagedAttentionParams &p, cudaStream_t stream) {
  const int group = p.n_heads / p.n_kv_heads;
  const int64_t tiles = (int64_t{p.max_rows_per_seq} * group + kM - 1) / kM;
  if (tiles > INT32_MAX) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(tiles), p.n_kv_heads, p.n_seqs);
  return launch_kernel(prefill_kernel<HD>, grid, kThreads, Tiles<HD>::smem, stream, p);
}

template <int HD>
cudaError_t set_smem() {
  static_assert(Tiles<HD>::smem <= 227 * 1024, "shared memory per block");
  return cudaFuncSetAttribute(prefill_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
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
