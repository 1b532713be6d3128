#include "paged_attention.cuh"

#include "decode_attention.cuh"
#include "kv_fp8.cuh"
#include "mma_fragments.cuh"
#include "paged_keys.cuh"
#include "tree_mask.cuh"

#include <climits>
#include <cstdlib>
#include <type_traits>

namespace vegas::kernels {

namespace {

constexpr int kTile = 64;      // KV tokens per shared-memory tile
constexpr int kThreads = 256;  // 8 warps
constexpr int kPad = 8;  // bf16 padding per K/V row: 16 bytes, keeps 16-byte reads conflict-free
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// cp.async copies (zero-filled rows past the range must not hold NaN).
using mma::cp_async16;
using mma::cp_async_commit;
using mma::cp_async_wait;

template <int HD, int QMAX>
struct Smem {
  static constexpr int kRow = HD + kPad;
  static constexpr size_t q = sizeof(float) * QMAX * HD;
  static constexpr size_t kv = sizeof(bf16) * 2 * kTile * kRow;  // two stages
  static constexpr size_t s = sizeof(float) * QMAX * (kTile + 1);
  static constexpr size_t stats = sizeof(float) * 3 * QMAX;
  static constexpr size_t total = q + 2 * kv + s + stats;
};

// FP8: fp8 caches (kv_fp8.cuh), each tile expanded in shared memory once landed.
template <int HD, int QMAX, bool FP8>
__global__ void __launch_bounds__(kThreads) attention_kernel(PagedAttentionParams p) {
  pdl_enter();
  using S = Smem<HD, QMAX>;
  static_assert(HD % 8 == 0 && HD <= 256, "16-byte K/V chunks, rope_kv's bound");
  static_assert(S::total + sizeof(int) * QMAX <= 227 * 1024, "shared memory per block");
  constexpr int kChunks = HD / 8;  // 16-byte chunks per K/V row
  extern __shared__ __align__(16) unsigned char smem[];
  float *q_s = reinterpret_cast<float *>(smem);
  bf16 *k_s = reinterpret_cast<bf16 *>(smem + S::q);
  bf16 *v_s = reinterpret_cast<bf16 *>(smem + S::q + S::kv);
  float *s_s = reinterpret_cast<float *>(smem + S::q + 2 * S::kv);
  float *m_s = reinterpret_cast<float *>(smem + S::q + 2 * S::kv + S::s);
  float *l_s = m_s + QMAX;
  float *alpha_s = l_s + QMAX;
  __shared__ int cap_s[QMAX];  // capture slot of each query vector, -1 = none

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int group = p.n_heads / p.n_kv_heads;
  const int rows_per_tile = QMAX / group;
  const int seq = blockIdx.x / p.n_kv_heads, kvh = blockIdx.x % p.n_kv_heads;
  const int n_rows = p.seq_n_rows[seq];
  const int r0 = blockIdx.y * rows_per_tile;
  if (r0 >= n_rows) return;
  const int tile_rows = min(rows_per_tile, n_rows - r0);
  const int nq = tile_rows * group;  // query vectors of this block: row-major (row, head in group)
  const int start_pos = p.seq_start_pos[seq];
  const int row_base = p.seq_row_start[seq] + r0;
  const int32_t *table = p.page_table + p.seq_page_off[seq];
  if (defers_to_verify(p, seq, n_rows)) return;  // its output or partials are written already
  if (defers_to_prefill(p, seq, n_rows)) {
    // prefill_attention writes these rows; the merge must find no partial result for them.
    if (p.n_splits > 1)
      for (int i = tid; i < nq; i += kThreads)
        p.partial_lse[(static_cast<int64_t>(blockIdx.z) * p.total_rows + row_base + i / group) *
                          p.n_heads +
                      kvh * group + i % group] = -INFINITY;
    return;
  }

  // This block's key range: split z of keys [0, n_keys), in whole tiles.
  const KeyMap keys = key_map(p, seq);
  const int n_keys = keys.n_sel + start_pos + r0 + tile_rows - keys.prefix;
  const int per_split = ((n_keys + p.n_splits - 1) / p.n_splits + kTile - 1) / kTile * kTile;
  const int begin = blockIdx.z * per_split;
  const int end = min(n_keys, begin + per_split);
  const int n_cand = p.cap_logits == nullptr ? 0 : p.seq_cap_cand[seq];
  // A tree sequence's rows see a key past the tree's base only where their
  // mask has its bit (paged_attention.cuh).
  const int tree_off = p.seq_tree_off == nullptr ? -1 : p.seq_tree_off[seq];
  const int32_t *tree = tree_off >= 0 ? p.tree_data + tree_off : nullptr;
  const int tree_base = tree != nullptr ? tree[0] : INT_MAX;

  for (int i = tid; i < nq * HD; i += kThreads) {
    const int qi = i / HD, d = i % HD;
    const int row = row_base + qi / group, h = kvh * group + qi % group;
    q_s[i] = __bfloat162float(p.q[(static_cast<int64_t>(row) * p.n_heads + h) * HD + d]) * p.scale *
             kLog2e;
  }
  for (int i = tid; i < QMAX; i += kThreads) {
    m_s[i] = -INFINITY;
    l_s[i] = 0.0f;
    cap_s[i] = (p.cap_logits != nullptr && i < nq) ? p.row_cap_slot[row_base + i / group] : -1;
  }

  auto load_tile = [&](int tile_start, int stage) {
    bf16 *kd = k_s + stage * kTile * S::kRow;
    bf16 *vd = v_s + stage * kTile * S::kRow;
    for (int i = tid; i < kTile * kChunks; i += kThreads) {
      const int t = i / kChunks, c = i % kChunks;
      const bool valid = tile_start + t < end;
      int64_t off = 0;
      if (valid) {
        const int pos = keys.pos(tile_start + t);
        const int64_t slot =
            static_cast<int64_t>(table[pos / p.page_size]) * p.page_size + pos % p.page_size;
        off = (slot * p.n_kv_heads + kvh) * HD + c * 8;
      }
      stage_piece<HD, FP8>(kd + t * S::kRow, c, p.k_cache, p.k_scale, off, valid);
      stage_piece<HD, FP8>(vd + t * S::kRow, c, p.v_cache, p.v_scale, off, valid);
    }
  };

  constexpr int kGroups = QMAX * kChunks;  // (query, 8-dim chunk) output groups
  constexpr int kPerThread = (kGroups + kThreads - 1) / kThreads;
  float acc[kPerThread][8];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[k][e] = 0.0f;

  const int n_groups = nq * kChunks;  // (query, 8-dim chunk) pairs of this block
  const int subs = n_groups * 2 <= kThreads ? kThreads / n_groups : 1;
  const int n_tiles = begin < end ? (end - begin + kTile - 1) / kTile : 0;
  if (n_tiles > 0) load_tile(begin, 0);
  cp_async_commit();
  for (int j = 0; j < n_tiles; ++j) {
    const int tile_start = begin + j * kTile;
    if (j + 1 < n_tiles) {
      load_tile(tile_start + kTile, (j + 1) & 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if constexpr (FP8) {
      for (int r = tid; r < 2 * kTile; r += kThreads)
        expand_staged_row<HD>((r < kTile ? k_s : v_s) + ((j & 1) * kTile + r % kTile) * S::kRow);
      __syncthreads();
    }
    const bf16 *kb = k_s + (j & 1) * kTile * S::kRow;
    const bf16 *vb = v_s + (j & 1) * kTile * S::kRow;

    // Scores (log2 domain), causal and range masked.
    for (int i = tid; i < nq * kTile; i += kThreads) {
      const int qi = i / kTile, t = i % kTile;
      const float *qr = q_s + qi * HD;
      const bf16 *kr = kb + t * S::kRow;
      // Four independent partial sums: a single FMA chain over head_dim
      // would leave the few warps of a decode block waiting on its latency.
      float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        float kf[8];
        unpack8(*reinterpret_cast<const uint4 *>(kr + c * 8), kf);
        const float4 qa = *reinterpret_cast<const float4 *>(qr + c * 8);
        const float4 qb = *reinterpret_cast<const float4 *>(qr + c * 8 + 4);
        d0 = fmaf(qa.x, kf[0], fmaf(qb.x, kf[4], d0));
        d1 = fmaf(qa.y, kf[1], fmaf(qb.y, kf[5], d1));
        d2 = fmaf(qa.z, kf[2], fmaf(qb.z, kf[6], d2));
        d3 = fmaf(qa.w, kf[3], fmaf(qb.w, kf[7], d3));
      }
      const float dot = (d0 + d1) + (d2 + d3);
      const int j = tile_start + t;
      const int pos = j < end ? keys.pos(j) : INT_MAX;
      const int qpos = start_pos + r0 + qi / group;
      bool visible = pos <= qpos;
      if (visible && pos >= tree_base)
        visible = tree_row_sees(tree, r0 + qi / group, pos - tree_base);
      s_s[qi * (kTile + 1) + t] = visible ? dot : -INFINITY;
      // Captured rows are dense, so key j is position j.
      const int slot = cap_s[qi];
      if (slot >= 0 && visible && pos < n_cand)
        p.cap_logits[(static_cast<int64_t>(slot) * p.n_heads + kvh * group + qi % group) *
                         p.cap_stride +
                     pos] = __float2half_rn(dot * kLn2);
    }
    __syncthreads();

    // Online softmax: one warp per query vector.
    for (int qi = warp; qi < nq; qi += kThreads / 32) {
      float *sr = s_s + qi * (kTile + 1);
      const float s0 = sr[lane], s1 = sr[lane + 32];
      const float m_old = m_s[qi];
      const float m_new = fmaxf(m_old, warp_max(fmaxf(s0, s1)));
      const float p0 = m_new == -INFINITY ? 0.0f : exp2f(s0 - m_new);
      const float p1 = m_new == -INFINITY ? 0.0f : exp2f(s1 - m_new);
      const float sum = warp_sum(p0 + p1);
      sr[lane] = p0;
      sr[lane + 32] = p1;
      __syncwarp();  // every lane read m_s[qi] before lane 0 rewrites it
      if (lane == 0) {
        const float alpha = m_old == -INFINITY ? 0.0f : exp2f(m_old - m_new);
        alpha_s[qi] = alpha;
        l_s[qi] = l_s[qi] * alpha + sum;
        m_s[qi] = m_new;
      }
    }
    __syncthreads();

    // P·V into the register accumulators. Few output groups (decoding: one
    // row of a small GQA group) would leave most threads idle, so then `subs`
    // threads share a group, each summing every subs-th token of the tile;
    // their partial sums are added once, after the last tile.
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int g = subs > 1 ? tid % n_groups : tid + k * kThreads;
      const int sub = subs > 1 ? tid / n_groups : 0;
      if (g < n_groups && sub < subs && (subs == 1 || k == 0)) {
        const int qi = g / kChunks, c = g % kChunks;
        const float alpha = alpha_s[qi];
        const float *pr = s_s + qi * (kTile + 1);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[k][e] *= alpha;
#pragma unroll 4
        for (int t = sub; t < kTile; t += subs) {
          const float pt = pr[t];
          float vf[8];
          unpack8(*reinterpret_cast<const uint4 *>(vb + t * S::kRow + c * 8), vf);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[k][e] += pt * vf[e];
        }
      }
    }
    __syncthreads();  // the next load overwrites this stage
  }
  __syncthreads();  // with no tile at all, m_s/l_s were only initialised above

  if (subs > 1) {  // add the token subsets' partial sums; K/V tiles are free now
    float *red = reinterpret_cast<float *>(k_s);
    const int sub = tid / n_groups;
    if (sub < subs && sub > 0)
#pragma unroll
      for (int e = 0; e < 8; ++e) red[((sub - 1) * n_groups + tid % n_groups) * 8 + e] = acc[0][e];
    __syncthreads();
    if (tid < n_groups)
      for (int s2 = 1; s2 < subs; ++s2)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[0][e] += red[((s2 - 1) * n_groups + tid) * 8 + e];
  }

#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int g = tid + k * kThreads;
    if (g >= nq * kChunks) continue;
    const int qi = g / kChunks, c = g % kChunks;
    const int row = row_base + qi / group, h = kvh * group + qi % group;
    const float l = l_s[qi];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    float o[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = acc[k][e] * inv;
    if (p.n_splits == 1) {
      *reinterpret_cast<uint4 *>(p.out + (static_cast<int64_t>(row) * p.n_heads + h) * HD + c * 8) =
          pack8(o);
      if (c == 0 && cap_s[qi] >= 0)
        p.cap_lse[static_cast<int64_t>(cap_s[qi]) * p.n_heads + h] =
            l > 0.0f ? (m_s[qi] + log2f(l)) * kLn2 : -INFINITY;
    } else {
      const int64_t idx = static_cast<int64_t>(blockIdx.z) * p.total_rows + row;
      float *po = p.partial_out + (idx * p.n_heads + h) * HD + c * 8;
      *reinterpret_cast<float4 *>(po) = make_float4(o[0], o[1], o[2], o[3]);
      *reinterpret_cast<float4 *>(po + 4) = make_float4(o[4], o[5], o[6], o[7]);
      if (c == 0) p.partial_lse[idx * p.n_heads + h] = l > 0.0f ? m_s[qi] + log2f(l) : -INFINITY;
    }
  }
}

// Combines the splits of each (row, head): weights 2^(lse_z - max). One warp
// per (row, head), so a small decode batch still spreads over many warps (one
// block per row left most threads idle and serialised the splits: 9 us per
// layer at 16 rows). Lane = (split subset, 8-dim chunk): the head_dim / 8
// chunks repeat across the warp, each repetition summing every subs-th split,
// so a lane's partial loads are few and all in flight at once (a lane per
// chunk over all splits, 3/4 of the warp idle at head_dim 64, took 9.6 us a
// layer at 8K x 16 verification, 16 splits, on the H200); the subsets are
// added by shuffles.
__global__ void merge_kernel(PagedAttentionParams p) {
  pdl_enter();
  const int lane = threadIdx.x & 31;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (item >= static_cast<int64_t>(p.total_rows) * p.n_heads) return;
  const int row = static_cast<int>(item / p.n_heads), h = static_cast<int>(item % p.n_heads);
  const int64_t split_stride = static_cast<int64_t>(p.total_rows) * p.n_heads;
  // Lane z holds the lse of splits z and z + 32 (n_splits <= 64), so every
  // load is issued at once instead of one dependent load per split.
  const float *lse = p.partial_lse + item;
  const float l0 = lane < p.n_splits ? lse[lane * split_stride] : -INFINITY;
  const float l1 = lane + 32 < p.n_splits ? lse[(lane + 32) * split_stride] : -INFINITY;
  const float m = warp_max(fmaxf(l0, l1));
  const float w0 = l0 == -INFINITY ? 0.0f : exp2f(l0 - m);
  const float w1 = l1 == -INFINITY ? 0.0f : exp2f(l1 - m);
  const float wsum = warp_sum(w0 + w1);
  const int chunks = p.head_dim / 8;  // <= 32
  const int subs = 32 / chunks;
  const int c = lane % chunks, sub = lane / chunks;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const float *po = p.partial_out + item * p.head_dim + c * 8;
  const int64_t po_stride = split_stride * p.head_dim;
  const int rounds = (p.n_splits + subs - 1) / subs;
#pragma unroll 4
  for (int r = 0; r < rounds; ++r) {
    const int z = r * subs + sub;  // every lane shuffles, whatever its split
    const float a = __shfl_sync(0xffffffffu, w0, z & 31);
    const float b = __shfl_sync(0xffffffffu, w1, z & 31);
    const float w = z < 32 ? a : b;
    if (sub >= subs || z >= p.n_splits || w == 0.0f) continue;
    const float4 x = *reinterpret_cast<const float4 *>(po + z * po_stride);
    const float4 y = *reinterpret_cast<const float4 *>(po + z * po_stride + 4);
    acc[0] += w * x.x, acc[1] += w * x.y, acc[2] += w * x.z, acc[3] += w * x.w;
    acc[4] += w * y.x, acc[5] += w * y.y, acc[6] += w * y.z, acc[7] += w * y.w;
  }
  // Lane c (subset 0) adds the other subsets' own sums of its chunk.
  float own[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) own[e] = acc[e];
  for (int s2 = 1; s2 < subs; ++s2)
#pragma unroll
    for (int e = 0; e < 8; ++e)
      acc[e] += __shfl_sync(0xffffffffu, own[e], (lane + s2 * chunks) & 31);
  const float inv = wsum > 0.0f ? 1.0f / wsum : 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) acc[e] *= inv;
  if (lane == 0 && p.cap_logits != nullptr) {
    const int slot = p.row_cap_slot[row];
    if (slot >= 0)
      p.cap_lse[static_cast<int64_t>(slot) * p.n_heads + h] =
          wsum > 0.0f ? (m + log2f(wsum)) * kLn2 : -INFINITY;
  }
  if (lane < chunks) *reinterpret_cast<uint4 *>(p.out + item * p.head_dim + lane * 8) = pack8(acc);
}

template <int HD, int QMAX>
cudaError_t launch(const PagedAttentionParams &p, cudaStream_t stream) {
  const int group = p.n_heads / p.n_kv_heads;
  const int rows_per_tile = QMAX / group;
  const int row_tiles = (p.max_rows_per_seq + rows_per_tile - 1) / rows_per_tile;
  const dim3 grid(p.n_seqs * p.n_kv_heads, row_tiles, p.n_splits);
  if (p.k_scale != nullptr)
    return launch_kernel(attention_kernel<HD, QMAX, true>, grid, kThreads, Smem<HD, QMAX>::total,
                         stream, p);
  return launch_kernel(attention_kernel<HD, QMAX, false>, grid, kThreads, Smem<HD, QMAX>::total,
                       stream, p);
}

// The head dimensions instantiated: the tiny test models' 16 and 32, and
// those of real models (Phi's 80 and 96, Llama/Qwen's 64 and 128, Gemma's 256).
template <typename F>
void for_each_head_dim(F &&f) {
  f(std::integral_constant<int, 16>{});
  f(std::integral_constant<int, 32>{});
  f(std::integral_constant<int, 48>{});
  f(std::integral_constant<int, 64>{});
  f(std::integral_constant<int, 80>{});
  f(std::integral_constant<int, 96>{});
  f(std::integral_constant<int, 112>{});
  f(std::integral_constant<int, 128>{});
  f(std::integral_constant<int, 160>{});
  f(std::integral_constant<int, 192>{});
  f(std::integral_constant<int, 256>{});
}

template <int HD, int QMAX>
cudaError_t set_smem() {
  const int bytes = static_cast<int>(Smem<HD, QMAX>::total);
  const auto attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
  const cudaError_t e = cudaFuncSetAttribute(attention_kernel<HD, QMAX, false>, attr, bytes);
  return e != cudaSuccess ? e : cudaFuncSetAttribute(attention_kernel<HD, QMAX, true>, attr, bytes);
}

// The register-streaming kernel for one-row batches (decode_attention.cuh);
// VEGAS_CUDA_DECODE_KERNEL=0 keeps them on the tiled kernel (A/B timing).
bool decode_kernel_enabled() {
  static const bool enabled = variant_enabled("VEGAS_CUDA_DECODE_KERNEL");
  return enabled;
}

}  // namespace

cudaError_t paged_attention_init() {
  cudaError_t e = decode_attention_mma_init();
  for_each_head_dim([&](auto hd) {
    constexpr int HD = decltype(hd)::value;
    if (e == cudaSuccess) e = set_smem<HD, 16>();
    if (e == cudaSuccess) e = set_smem<HD, 64>();
  });
  return e;
}

bool paged_attention_supports(int32_t head_dim, int32_t group_size) {
  bool known = false;
  for_each_head_dim([&](auto hd) { known = known || head_dim == decltype(hd)::value; });
  return known && group_size >= 1 && group_size <= 64;
}

cudaError_t paged_attention(const PagedAttentionParams &p, cudaStream_t stream) {
  if (p.n_seqs == 0 || p.max_rows_per_seq == 0) return cudaSuccess;
  if (p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0 || p.n_splits < 1 || p.n_splits > 64 ||
      !paged_attention_supports(p.head_dim, p.n_heads / p.n_kv_heads) ||
      (p.n_splits > 1 && (p.partial_out == nullptr || p.partial_lse == nullptr)) ||
      (p.seq_sparse_off != nullptr &&
       (p.sparse_data == nullptr || p.layer < 0 || p.layer >= p.n_layers)) ||
      (p.cap_logits != nullptr &&
       (p.cap_lse == nullptr || p.row_cap_slot == nullptr || p.seq_cap_cand == nullptr)))
    return cudaErrorInvalidValue;
  const int group = p.n_heads / p.n_kv_heads;
  // Small query tiles (decoding, short verification) keep shared memory low
  // enough for two or more blocks per multiprocessor.
  const bool small = p.max_rows_per_seq * group <= 16;
  cudaError_t e = cudaErrorInvalidValue;
  if (decode_attention_applies(p) && decode_kernel_enabled()) {
    e = decode_attention(p, stream);
    if (p.split_counters != nullptr) return e;  // merged in the kernel
  } else {
    for_each_head_dim([&](auto hd) {
      constexpr int HD = decltype(hd)::value;
      if (p.head_dim == HD) e = small ? launch<HD, 16>(p, stream) : launch<HD, 64>(p, stream);
    });
  }
  if (e != cudaSuccess || p.n_splits == 1) return e;
  return paged_attention_merge(p, stream);
}

cudaError_t paged_attention_merge(const PagedAttentionParams &p, cudaStream_t stream) {
  if (p.total_rows == 0 || p.n_splits == 1) return cudaSuccess;
  if (p.n_splits < 1 || p.n_splits > 64 || p.head_dim % 8 != 0 || p.head_dim > 256 ||
      p.partial_out == nullptr || p.partial_lse == nullptr ||
      (p.cap_logits != nullptr && (p.cap_lse == nullptr || p.row_cap_slot == nullptr)))
    return cudaErrorInvalidValue;
  const int64_t warps = static_cast<int64_t>(p.total_rows) * p.n_heads;
  return launch_kernel(merge_kernel, static_cast<unsigned>((warps + 7) / 8), 256, 0, stream, p);
}

}  // namespace vegas::kernels
