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
#include "decode_common.cuh"

namespace vegas::kernels {

namespace {

// Key rows per lane per step, and blocks per multiprocessor: four blocks of
// four warps (at most 128 registers) up to four query heads per group; five
// to eight heads hold up to 128 registers of queries and accumulators alone.
// The wide blocks (PagedAttentionParams::decode_wide) keep the same
// registers, one block a multiprocessor: sixteen warps up to four heads,
// eight above (the registers of eight warps a multiprocessor).
template <int GROUP, int WARPS>
struct Tuning {
  static constexpr int kUnroll = GROUP >= 5 ? 2 : 4;
  static constexpr int kMinBlocks = WARPS > 4 ? 1 : GROUP >= 5 ? 2 : 4;
};
// Wide blocks' warps; groups of eight keep their four-warp blocks (not
// measured wide).
template <int GROUP>
constexpr int kWideWarps = GROUP <= 4   ? 16
                           : GROUP <= 7 ? 8
                                        : 4;
constexpr float kLog2e = 1.4426950408889634f;

// FP8: fp8 caches (kv_fp8.cuh), expanded as they are loaded.
template <int HD, int GROUP, bool FP8, int kWarps>
__global__ void __launch_bounds__(kWarps * 32, Tuning<GROUP, kWarps>::kMinBlocks)
    decode_kernel(PagedAttentionParams p) {
  constexpr int kLanes = HD / 8;        // lanes per key row, 8 dimensions each
  constexpr int kGroups = 32 / kLanes;  // key rows per warp load
  constexpr int kUnroll = Tuning<GROUP, kWarps>::kUnroll;
  constexpr int kStep = kGroups * kUnroll;  // keys per warp step
  static_assert(kLanes * kGroups == 32, "a power-of-two number of lanes per key row");
  __shared__ float red_m[kWarps][GROUP], red_l[kWarps][GROUP];
  __shared__ __align__(16) float red_acc[kWarps][GROUP][HD];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane / kLanes, c = lane % kLanes;
  const int seq = blockIdx.x / p.n_kv_heads, kvh = blockIdx.x % p.n_kv_heads;
  // With read_ahead, the indices and the cached keys below each row's own
  // position were written before the previous kernel began: the block reads
  // them, and issues its first K/V loads, while that kernel still runs.
  if (!p.read_ahead) pdl_wait();
  DecodeSlice sl;
  if (!decode_slice(p, seq, &sl)) return;  // graph padding: no row
  const int row = sl.row, end = sl.end;
  const int64_t row_stride = static_cast<int64_t>(p.n_kv_heads) * HD;  // per cache slot
  const int64_t head_off = static_cast<int64_t>(kvh) * HD + c * 8;
  // Step keys of this lane: base + u * kGroups + g, base warp-uniform. The
  // loop consumes kr/vr and loads the next step's at its end.
  constexpr int kBlockStep = kWarps * kStep;
  const int first = sl.begin + warp * kStep;
  int64_t slot[kUnroll];
  uint4 kr[kUnroll], vr[kUnroll];
  decode_first_step<HD, kUnroll, FP8>(p, sl, first, kGroups, g, row_stride, head_off, slot, kr, vr);
  pdl_launch_dependents();

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

  for (int base = first; base < end; base += kBlockStep) {
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      valid[u] = slot[u] >= 0;
      slot[u] = sl.slot(p, base + kBlockStep + u * kGroups + g);  // the next step's lookups
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
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      load_kv_row<HD, FP8>(p, slot[u], row_stride, head_off, kr[u], vr[u]);
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
  decode_finish<HD, GROUP, kWarps>(p, row, kvh, red_m, red_l, red_acc);
}

template <int HD, int GROUP, int WARPS>
cudaError_t launch_warps(const PagedAttentionParams &p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.n_seqs * p.n_kv_heads),
                  static_cast<unsigned>(p.n_splits));
  if (p.k_scale != nullptr)
    return launch_kernel(decode_kernel<HD, GROUP, true, WARPS>, grid, WARPS * 32, 0, stream, p);
  return launch_kernel(decode_kernel<HD, GROUP, false, WARPS>, grid, WARPS * 32, 0, stream, p);
}

template <int HD, int GROUP>
cudaError_t launch(const PagedAttentionParams &p, cudaStream_t stream) {
  if (p.decode_wide != 0) return launch_warps<HD, GROUP, kWideWarps<GROUP>>(p, stream);
  return launch_warps<HD, GROUP, 4>(p, stream);
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
    case 5:
      return launch<HD, 5>(p, stream);
    case 6:
      return launch<HD, 6>(p, stream);
    case 7:
      return launch<HD, 7>(p, stream);
    case 8:
      return launch<HD, 8>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

bool decode_attention_applies(const PagedAttentionParams &p) {
  if (p.max_rows_per_seq != 1 || p.cap_logits != nullptr || p.seq_tree_off != nullptr ||
      p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0 || (p.head_dim != 64 && p.head_dim != 128))
    return false;
  const int group = p.n_heads / p.n_kv_heads;
  return group == 1 || group == 2 || (group >= 4 && group <= 8);
}

int32_t decode_attention_resident_blocks(const PagedAttentionParams &p) {
  if (decode_attention_mma_applies(p)) return decode_attention_mma_resident_blocks(p);
  return p.n_heads / p.n_kv_heads >= 5 ? Tuning<8, 4>::kMinBlocks : Tuning<4, 4>::kMinBlocks;
}

int32_t decode_attention_wide_resident_blocks(const PagedAttentionParams &p) {
  const int group = p.n_heads / p.n_kv_heads;
  return group <= 4   ? Tuning<4, kWideWarps<4>>::kMinBlocks
         : group <= 7 ? Tuning<7, kWideWarps<7>>::kMinBlocks
                      : Tuning<8, kWideWarps<8>>::kMinBlocks;
}

cudaError_t decode_attention(const PagedAttentionParams &p, cudaStream_t stream) {
  if (p.n_seqs == 0) return cudaSuccess;
  if (!decode_attention_applies(p) || p.n_splits < 1 || p.n_splits > 64 || p.page_size <= 0 ||
      (p.n_splits > 1 && (p.partial_out == nullptr || p.partial_lse == nullptr)))
    return cudaErrorInvalidValue;
  if (decode_attention_mma_applies(p)) return decode_attention_mma(p, stream);
  return p.head_dim == 64 ? launch_group<64>(p, stream) : launch_group<128>(p, stream);
}

}  // namespace vegas::kernels
