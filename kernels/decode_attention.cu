// One query row per sequence: a block per (sequence, KV head, split) and no
// shared-memory tiles or block-wide barriers inside the key loop. Each warp
// streams its own share of the keys straight into registers: HD/8 lanes read
// one key row (16 bytes each), so one warp load covers 32/(HD/8) keys and a
// lane keeps kUnroll K and V loads in flight, while the page-table lookups of
// its next keys are already issued. Every lane group keeps a private online
// softmax for the GQA group's query heads; groups and warps are combined once,
// after the loop. (The tiled paged kernel spent most of its time in barriers
// and shared-memory round trips here: 1.3 TB/s at 2K x 64 on the H100.)
#include <cstdint>

#include "decode_attention.cuh"
#include "paged_keys.cuh"

namespace vegas::kernels {

namespace {

constexpr int kWarps = 4;
// Key rows per lane per step, and blocks per multiprocessor: four blocks of
// four warps (at most 128 registers) up to four query heads per group; eight
// heads hold 128 registers of queries and accumulators alone.
template <int GROUP>
struct Tuning {
  static constexpr int kUnroll = GROUP >= 8 ? 2 : 4;
  static constexpr int kMinBlocks = GROUP >= 8 ? 2 : 4;
};
constexpr float kLog2e = 1.4426950408889634f;

// K/V rows are read once per step by one block: keep them out of L1.
__device__ __forceinline__ uint4 load_stream(const bf16 *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <int HD, int GROUP>
__global__ void __launch_bounds__(kWarps * 32, Tuning<GROUP>::kMinBlocks)
    decode_kernel(PagedAttentionParams p) {
  pdl_enter();
  constexpr int kLanes = HD / 8;        // lanes per key row, 8 dimensions each
  constexpr int kGroups = 32 / kLanes;  // key rows per warp load
  constexpr int kUnroll = Tuning<GROUP>::kUnroll;
  constexpr int kStep = kGroups * kUnroll;  // keys per warp step
  static_assert(kLanes * kGroups == 32, "a power-of-two number of lanes per key row");
  __shared__ float red_m[kWarps][GROUP], red_l[kWarps][GROUP];
  __shared__ __align__(16) float red_acc[kWarps][GROUP][HD];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane / kLanes, c = lane % kLanes;
  const int seq = blockIdx.x / p.n_kv_heads, kvh = blockIdx.x % p.n_kv_heads;
  if (p.seq_n_rows[seq] == 0) return;  // graph padding: no row
  const int row = p.seq_row_start[seq];
  const int start_pos = p.seq_start_pos[seq];
  const int32_t *table = p.page_table + p.seq_page_off[seq];
  const KeyMap keys = key_map(p, seq);
  const int n_keys = keys.n_sel + start_pos + 1 - keys.prefix;
  const int per_split = (n_keys + p.n_splits - 1) / p.n_splits;
  const int begin = blockIdx.y * per_split;
  const int end = min(n_keys, begin + per_split);

  // The group's query vectors (this lane's 8 dimensions), log2 domain.
  float q[GROUP][8];
#pragma unroll
  for (int h = 0; h < GROUP; ++h) {
    const int64_t at = (static_cast<int64_t>(row) * p.n_heads + kvh * GROUP + h) * HD + c * 8;
    unpack8(*reinterpret_cast<const uint4 *>(p.q + at), q[h]);
#pragma unroll
    for (int e = 0; e < 8; ++e) q[h][e] *= p.scale * kLog2e;
  }
  float m[GROUP], l[GROUP], acc[GROUP][8];
#pragma unroll
  for (int h = 0; h < GROUP; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[h][e] = 0.0f;
  }

  const int64_t row_stride = static_cast<int64_t>(p.n_kv_heads) * HD;  // per cache slot
  const int64_t head_off = static_cast<int64_t>(kvh) * HD + c * 8;
  auto slot_of = [&](int j) -> int64_t {
    if (j >= end) return -1;
    const int pos = keys.pos(j);
    return static_cast<int64_t>(table[pos / p.page_size]) * p.page_size + pos % p.page_size;
  };
  // Step keys of this lane: base + u * kGroups + g, base warp-uniform.
  constexpr int kBlockStep = kWarps * kStep;
  int64_t slot[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) slot[u] = slot_of(begin + warp * kStep + u * kGroups + g);
  for (int base = begin + warp * kStep; base < end; base += kBlockStep) {
    uint4 kr[kUnroll], vr[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      kr[u] = make_uint4(0, 0, 0, 0);
      vr[u] = kr[u];
      if (slot[u] >= 0) {
        kr[u] = load_stream(p.k_cache + slot[u] * row_stride + head_off);
        vr[u] = load_stream(p.v_cache + slot[u] * row_stride + head_off);
      }
    }
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      valid[u] = slot[u] >= 0;
      slot[u] = slot_of(base + kBlockStep + u * kGroups + g);  // the next step's lookups
    }

    float s[GROUP][kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[8];
      unpack8(kr[u], kf);
#pragma unroll
      for (int h = 0; h < GROUP; ++h) {
        float d = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) d = fmaf(q[h][e], kf[e], d);
#pragma unroll
        for (int o = 1; o < kLanes; o <<= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        s[h][u] = valid[u] ? d : -INFINITY;
      }
    }
    float vf[kUnroll][8];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) unpack8(vr[u], vf[u]);
#pragma unroll
    for (int h = 0; h < GROUP; ++h) {
      float mx = s[h][0];
#pragma unroll
      for (int u = 1; u < kUnroll; ++u) mx = fmaxf(mx, s[h][u]);
      const float m_new = fmaxf(m[h], mx);
      if (m_new == -INFINITY) continue;         // no valid key seen yet
      const float alpha = exp2f(m[h] - m_new);  // m[h] = -inf gives 0
      l[h] *= alpha;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[h][e] *= alpha;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const float pu = exp2f(s[h][u] - m_new);
        l[h] += pu;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[h][e] = fmaf(pu, vf[u][e], acc[h][e]);
      }
      m[h] = m_new;
    }
  }

  // Lane groups of the warp: same dimensions, different keys.
#pragma unroll
  for (int o = kLanes; o < 32; o <<= 1)
#pragma unroll
    for (int h = 0; h < GROUP; ++h) {
      const float m_o = __shfl_xor_sync(0xffffffffu, m[h], o);
      const float l_o = __shfl_xor_sync(0xffffffffu, l[h], o);
      const float m_new = fmaxf(m[h], m_o);
      const float a = m[h] == -INFINITY ? 0.0f : exp2f(m[h] - m_new);
      const float b = m_o == -INFINITY ? 0.0f : exp2f(m_o - m_new);
      l[h] = l[h] * a + l_o * b;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        acc[h][e] = acc[h][e] * a + __shfl_xor_sync(0xffffffffu, acc[h][e], o) * b;
      m[h] = m_new;
    }
  if (g == 0)
#pragma unroll
    for (int h = 0; h < GROUP; ++h) {
      if (c == 0) {
        red_m[warp][h] = m[h];
        red_l[warp][h] = l[h];
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) red_acc[warp][h][c * 8 + e] = acc[h][e];
    }
  __syncthreads();

  // The warps: one thread per (query head, 8 dimensions).
  const int t = threadIdx.x;
  const bool writer = t < GROUP * kLanes;
  const int h = writer ? t / kLanes : 0, cc = t % kLanes;
  float mm = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) mm = fmaxf(mm, red_m[w][h]);
  float ll = 0.0f, o[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (mm != -INFINITY)
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float wgt = red_m[w][h] == -INFINITY ? 0.0f : exp2f(red_m[w][h] - mm);
      ll += red_l[w][h] * wgt;
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] += red_acc[w][h][cc * 8 + e] * wgt;
    }
  const float inv = ll > 0.0f ? 1.0f / ll : 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) o[e] *= inv;
  const int head = kvh * GROUP + h;
  bf16 *out = p.out + (static_cast<int64_t>(row) * p.n_heads + head) * HD + cc * 8;
  if (p.n_splits == 1) {
    if (writer) *reinterpret_cast<uint4 *>(out) = pack8(o);
    return;
  }
  const int64_t split_stride = static_cast<int64_t>(p.total_rows) * p.n_heads;
  const int64_t item = static_cast<int64_t>(row) * p.n_heads + head;  // split 0's (row, head)
  if (writer) {
    const int64_t at = blockIdx.y * split_stride + item;
    float *po = p.partial_out + at * HD + cc * 8;
    *reinterpret_cast<float4 *>(po) = make_float4(o[0], o[1], o[2], o[3]);
    *reinterpret_cast<float4 *>(po + 4) = make_float4(o[4], o[5], o[6], o[7]);
    if (cc == 0) p.partial_lse[at] = ll > 0.0f ? mm + log2f(ll) : -INFINITY;
  }
  if (p.split_counters == nullptr) return;  // paged_attention_merge combines the splits

  // The last split block of this (sequence, KV head) to finish merges them all
  // (the classic threadfence reduction): publish the partials, count, and let
  // the block that brings the count to n_splits read everyone's from L2.
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (t == 0) {
    int32_t *counter = p.split_counters + blockIdx.x;
    last = atomicAdd(counter, 1) == p.n_splits - 1;
    if (last) *counter = 0;  // ready for the next launch (graph replays)
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  // Every split's weight per head (all threads load the lse at once), then
  // each (head, 8 dimensions) piece is summed by kWarps threads over every
  // kWarps-th split, so the loads of a chain are few and independent.
  __shared__ float weight[GROUP][64];
  __shared__ float inv_sum[GROUP];
  for (int i = t; i < GROUP * p.n_splits; i += kWarps * 32) {
    const int hh = i / p.n_splits, z = i % p.n_splits;
    weight[hh][z] = __ldcg(p.partial_lse + z * split_stride + row * p.n_heads + kvh * GROUP + hh);
  }
  __syncthreads();
  if (t < GROUP) {
    float m_all = -INFINITY, wsum = 0.0f;
    for (int z = 0; z < p.n_splits; ++z) m_all = fmaxf(m_all, weight[t][z]);
    for (int z = 0; z < p.n_splits; ++z) {
      const float wz =
          m_all == -INFINITY || weight[t][z] == -INFINITY ? 0.0f : exp2f(weight[t][z] - m_all);
      weight[t][z] = wz;
      wsum += wz;
    }
    inv_sum[t] = wsum > 0.0f ? 1.0f / wsum : 0.0f;
  }
  __syncthreads();
  const int piece = t % (GROUP * kLanes), sub = t / (GROUP * kLanes);
  const int ph = piece / kLanes, pc = piece % kLanes;
  const int64_t pitem = static_cast<int64_t>(row) * p.n_heads + kvh * GROUP + ph;
  float r[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  constexpr int kPieces = GROUP * kLanes;
  constexpr int kSubs = kWarps * 32 / kPieces < kWarps ? kWarps * 32 / kPieces : kWarps;
  if (sub < kSubs)
#pragma unroll 4
    for (int z = sub; z < p.n_splits; z += kSubs) {
      const float wz = weight[ph][z];
      if (wz == 0.0f) continue;
      const float *src = p.partial_out + (z * split_stride + pitem) * HD + pc * 8;
      const float4 a = __ldcg(reinterpret_cast<const float4 *>(src));
      const float4 b = __ldcg(reinterpret_cast<const float4 *>(src + 4));
      r[0] += wz * a.x, r[1] += wz * a.y, r[2] += wz * a.z, r[3] += wz * a.w;
      r[4] += wz * b.x, r[5] += wz * b.y, r[6] += wz * b.z, r[7] += wz * b.w;
    }
  // Add the subsets (the warps' reduction buffer is free now).
  float *sums = &red_acc[0][0][0];  // kWarps * GROUP * HD floats >= (kSubs - 1) * kPieces * 8
  __syncthreads();
  if (sub > 0 && sub < kSubs)
#pragma unroll
    for (int e = 0; e < 8; ++e) sums[((sub - 1) * GROUP * kLanes + piece) * 8 + e] = r[e];
  __syncthreads();
  if (sub != 0) return;
  for (int s2 = 1; s2 < kSubs; ++s2)
#pragma unroll
    for (int e = 0; e < 8; ++e) r[e] += sums[((s2 - 1) * GROUP * kLanes + piece) * 8 + e];
#pragma unroll
  for (int e = 0; e < 8; ++e) r[e] *= inv_sum[ph];
  *reinterpret_cast<uint4 *>(p.out + pitem * HD + pc * 8) = pack8(r);
}

template <int HD, int GROUP>
cudaError_t launch(const PagedAttentionParams &p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.n_seqs * p.n_kv_heads),
                  static_cast<unsigned>(p.n_splits));
  return launch_kernel(decode_kernel<HD, GROUP>, grid, kWarps * 32, 0, stream, p);
}

template <int HD>
cudaError_t launch_group(const PagedAttentionParams &p, cudaStream_t stream) {
  switch (p.n_heads / p.n_kv_heads) {
    case 1:
      return launch<HD, 1>(p, stream);
    case 2:
      return launch<HD, 2>(p, stream);
    case 4:
      return launch<HD, 4>(p, stream);
    case 8:
      return launch<HD, 8>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

bool decode_attention_applies(const PagedAttentionParams &p) {
  if (p.max_rows_per_seq != 1 || p.cap_logits != nullptr || p.n_kv_heads <= 0 ||
      p.n_heads % p.n_kv_heads != 0 || (p.head_dim != 64 && p.head_dim != 128))
    return false;
  const int group = p.n_heads / p.n_kv_heads;
  return group == 1 || group == 2 || group == 4 || group == 8;
}

cudaError_t decode_attention(const PagedAttentionParams &p, cudaStream_t stream) {
  if (p.n_seqs == 0) return cudaSuccess;
  if (!decode_attention_applies(p) || p.n_splits < 1 || p.n_splits > 64 || p.page_size <= 0 ||
      (p.n_splits > 1 && (p.partial_out == nullptr || p.partial_lse == nullptr)))
    return cudaErrorInvalidValue;
  return p.head_dim == 64 ? launch_group<64>(p, stream) : launch_group<128>(p, stream);
}

}  // namespace vegas::kernels
