// What the two verify warps kernels (verify_attention_warps.cu for bf16
// caches, verify_attention_warps_fp8.cu for fp8 ones) share: the block's
// (sequence, KV head, split) slice of keys, the score capture's rows, the
// mask, capture and online softmax of a 16-key step, and the end (the warps'
// key slices combined, the splits merged by the last split block).
#pragma once

#include <cstdint>
#include <cuda/atomic>

#include "mma_fragments.cuh"
#include "verify_attention.cuh"
#include "verify_output.cuh"

namespace vegas::kernels::verify_warps {

using namespace mma;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kMinBlocks = 2;    // per multiprocessor
constexpr int kSplitRound = 64;  // split ranges in whole 64-key tiles, as the tiled kernel's
constexpr int kMaxVectors = 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// After the loop: every warp's unnormalised outputs [warp][vec][kOStride], m and l [warp][vec].
template <int HD, int MT>
struct Combination {
  static constexpr int kVec = 16 * MT;     // query vectors of a block
  static constexpr int kOStride = HD + 8;  // floats per vector
  static constexpr size_t bytes = sizeof(float) * kWarps * kVec * (kOStride + 2);
};

// A block's query vectors and its split's key range.
struct VerifySlice {
  int group, v_last, start_pos, row_start, begin, end, n_cand;
  const int32_t *table;
};

// log2 of a page size that is a power of two, else -1 (for page_slot).
__device__ __forceinline__ int page_shift_of(int page_size) {
  return (page_size & (page_size - 1)) == 0 ? __ffs(page_size) - 1 : -1;
}

// The cache slot of `key` of a sequence whose page table is `table` (slot
// numbers fit int32: CudaContext's pool has fewer slots).
__device__ __forceinline__ int page_slot(const int32_t *table, int page_size, int page_shift,
                                         int key) {
  const int page = page_shift >= 0 ? key >> page_shift : key / page_size;
  return table[page] * page_size + (key - page * page_size);
}

// False for a sequence the block does not verify (graph padding, rows the
// paged kernel takes). Split blockIdx.z of keys [0, n_keys) in whole 64-key
// tiles (the tiled kernel's ranges).
__device__ __forceinline__ bool verify_slice(const PagedAttentionParams &p, VerifySlice *vs) {
  const int seq = blockIdx.x / p.n_kv_heads;
  const int n_rows = p.seq_n_rows[seq];
  if (!defers_to_verify(p, seq, n_rows)) return false;
  vs->group = p.n_heads / p.n_kv_heads;
  vs->v_last = n_rows * vs->group - 1;  // query vectors (row, head in group), row-major
  vs->start_pos = p.seq_start_pos[seq];
  vs->row_start = p.seq_row_start[seq];
  vs->table = p.page_table + p.seq_page_off[seq];
  const int n_keys = vs->start_pos + n_rows;
  const int per_split =
      ((n_keys + p.n_splits - 1) / p.n_splits + kSplitRound - 1) / kSplitRound * kSplitRound;
  vs->begin = static_cast<int>(
      min(static_cast<int64_t>(n_keys), static_cast<int64_t>(blockIdx.z) * per_split));
  vs->end = min(n_keys, vs->begin + per_split);
  vs->n_cand = p.cap_logits == nullptr ? 0 : p.seq_cap_cand[seq];
  return true;
}

// The score capture of this thread's vectors: in M tile m, m * 16 + g and
// m * 16 + g + 8; a captured one writes its scores to capture row cap[m][hi]
// (in units of cap_stride; -1 = none: offsets take fewer registers than
// pointers). `any` whether some vector of the warp is captured, `pairs`
// whether rows are 4-byte aligned (a thread's keys come in pairs 2 t4,
// 2 t4 + 1 at even positions: one half2 store).
template <int MT>
struct Capture {
  int32_t cap[MT][2];
  bool any, pairs;
};

template <int MT>
__device__ __forceinline__ Capture<MT> capture_rows(const PagedAttentionParams &p,
                                                    const VerifySlice &vs, int kvh, int g) {
  Capture<MT> c;
  bool any = false;
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int gv = m * 16 + g + 8 * hi;
      c.cap[m][hi] = -1;
      if (p.cap_logits != nullptr && gv <= vs.v_last) {
        const int slot = p.row_cap_slot[vs.row_start + gv / vs.group];
        if (slot >= 0) c.cap[m][hi] = slot * p.n_heads + kvh * vs.group + gv % vs.group;
      }
      any = any || c.cap[m][hi] >= 0;
    }
  c.any = __any_sync(0xffffffffu, any);
  c.pairs = (p.cap_stride & 1) == 0;
  return c;
}

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

// The running online-softmax state of a warp's MT M tiles.
template <int MT, int HD>
struct SoftmaxState {
  float o[MT][HD / 8][4];
  float m_lo[MT], m_hi[MT], l_lo[MT], l_hi[MT];
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int m = 0; m < MT; ++m) {
#pragma unroll
      for (int d = 0; d < HD / 8; ++d) o[m][d][0] = o[m][d][1] = o[m][d][2] = o[m][d][3] = 0.0f;
      m_lo[m] = m_hi[m] = -INFINITY;
      l_lo[m] = l_hi[m] = 0.0f;
    }
  }
};

// One 16-key step from key `base` on (scores s, unscaled: the capture stores
// s * logit_scale, the logit; the softmax takes exp2(s * scale - m) in one
// FFMA): the causal mask and the range's end, the capture, the online
// softmax; s becomes the step's weights.
template <int MT, int HD>
__device__ __forceinline__ void mask_capture_softmax(const PagedAttentionParams &p,
                                                     const VerifySlice &vs, const Capture<MT> &cp,
                                                     int base, float logit_scale, float scale,
                                                     float (&s)[MT][2][4],
                                                     SoftmaxState<MT, HD> &st) {
  constexpr int kNk = 16;
  const int g = (threadIdx.x & 31) >> 2, t4 = threadIdx.x & 3;
  const bool masked = base + kNk - 1 > vs.start_pos || base + kNk > vs.end;
  const bool capture = cp.any && base < vs.n_cand;
  // Every key of the step seen and a candidate, rows 4-byte aligned: each
  // thread stores its key pairs without a check per key.
  const bool whole_capture = capture && !masked && base + kNk <= vs.n_cand && cp.pairs;
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    if (whole_capture)
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
        if (cp.cap[m][hi] < 0) continue;
        f16 *dst =
            p.cap_logits + static_cast<int64_t>(cp.cap[m][hi]) * p.cap_stride + base + 2 * t4;
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
          const bool seen =
              pos < vs.end && pos <= vs.start_pos + (m * 16 + g + 8 * (e >> 1)) / vs.group;
          if (!seen) s[m][n][e] = -INFINITY;
        }
      }
      if (capture && !whole_capture)  // captured rows are dense: key index = position
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          if (cp.cap[m][hi] < 0) continue;
          f16 *dst = p.cap_logits + static_cast<int64_t>(cp.cap[m][hi]) * p.cap_stride;
          const float a = s[m][n][2 * hi], b = s[m][n][2 * hi + 1];
          const bool lo_ok = a != -INFINITY && key < vs.n_cand;  // -inf: masked here
          const bool hi_ok = b != -INFINITY && key + 1 < vs.n_cand;
          if (lo_ok && hi_ok && cp.pairs) {
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
    lazy_softmax<kNk, HD>(s[m], mx_lo, mx_hi, scale, st.m_lo[m], st.m_hi[m], st.l_lo[m], st.l_hi[m],
                          st.o[m]);
  }
}

// After the key loop (every warp done with its stages, which `smem` held):
// each warp's state into the combination space, the warps' key slices of
// each (vector, 8-dim piece) combined and written, and with split counters
// the splits merged by the last split block.
template <int HD, int MT>
__device__ __forceinline__ void finish_verify_warps(const PagedAttentionParams &p,
                                                    const VerifySlice &vs, int kvh,
                                                    const SoftmaxState<MT, HD> &st,
                                                    unsigned char *smem) {
  using C = Combination<HD, MT>;
  constexpr int kPieces = HD / 8;
  const int warp = threadIdx.x >> 5;
  float *o_s = reinterpret_cast<float *>(smem);       // [warp][vec][kOStride]
  float *m_s = o_s + kWarps * C::kVec * C::kOStride;  // [warp][vec]
  float *l_s = m_s + kWarps * C::kVec;                // [warp][vec]
#pragma unroll
  for (int m = 0; m < MT; ++m)
    store_tile_state<HD, C::kOStride>(st.o[m], st.m_lo[m], st.m_hi[m], quad_sum(st.l_lo[m]),
                                      quad_sum(st.l_hi[m]), warp * C::kVec + m * 16, o_s, m_s, l_s);
  __syncthreads();

  // Combine the warps' key slices of each (vector, 8-dim chunk): weights 2^(m_w - m).
  for (int i = threadIdx.x; i < (vs.v_last + 1) * kPieces; i += kThreads) {
    const int v = i / kPieces, c = i % kPieces;
    float m, l, acc[8];
    combine_slices<kWarps, C::kOStride>(
        o_s, m_s, l_s, [&](int w) { return w * C::kVec + v; }, c, acc, m, l);
    write_verify_piece<HD>(p, vs.row_start + v / vs.group, kvh * vs.group + v % vs.group, c, acc, m,
                           l);
  }
  if (p.n_splits > 1 && p.split_counters != nullptr)
    merge_splits<HD, C::kVec>(p, vs.v_last + 1, vs.row_start, vs.group, kvh,
                              reinterpret_cast<float *>(smem));
}

// The fp8 kernel (verify_attention_warps_fp8.cu): its shared-memory size set
// once, and a launch for `vectors` query vectors a (sequence, KV head).
cudaError_t fp8_init();
cudaError_t fp8_launch(const PagedAttentionParams &p, int64_t vectors, cudaStream_t stream);

}  // namespace vegas::kernels::verify_warps
