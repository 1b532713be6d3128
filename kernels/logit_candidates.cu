#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda_utils.cuh"
#include "logit_candidates.cuh"

namespace vegas::kernels {

namespace {

constexpr int kThreads = 512;
constexpr int kDigitBits = 8;
constexpr int kDigits = 1 << kDigitBits;
constexpr int kDigitsPerLane = kDigits / 32;

// Unsigned keys in the order of the floats (-0 counted as +0, as the host's
// float comparisons do; NaN never reaches here).
__device__ __forceinline__ uint32_t order_key(float v) {
  uint32_t b = __float_as_uint(v);
  if ((b << 1) == 0) b = 0;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// The block's shared state of one selection.
struct SelectShared {
  using Reduce = cub::BlockReduce<int32_t, kThreads>;
  using Scan = cub::BlockScan<int32_t, kThreads>;
  union {
    typename Reduce::TempStorage reduce;
    typename Scan::TempStorage scan;
  } temp;
  int32_t hist[kDigits];
  int32_t finite_all;
  uint32_t found_prefix;
  int32_t found_remaining;
};

// Where one selection writes: the count (or a CandidateStatus) and up to
// `cap` ids and logits.
struct SelectOut {
  int32_t *count;
  int32_t *ids;
  float *values;
  int32_t cap;
  bool empty_ok;  // no finite logit: count 0 (a chunk of a row), not kCandidatesBadRow
};

// The candidates of the logits a block's threads hold: for_each(f) calls
// f(id, logit) for each of the thread's logits, for_each_in_order(f) the same
// over a contiguous range of ids per thread, ascending (the compaction's
// order); padding is -inf. Every thread calls it.
template <class ForEach, class ForEachInOrder>
__device__ void select_candidates(ForEach for_each, ForEachInOrder for_each_in_order, int32_t k,
                                  const SelectOut &out, SelectShared &sh) {
  // NaN / +inf, and the finite count.
  int32_t finite = 0, bad = 0;
  for_each([&](int, float x) {
    bad |= !(x < INFINITY);
    finite += x > -INFINITY;
  });
  const int32_t finite_sum = SelectShared::Reduce(sh.temp.reduce).Sum(finite);
  if (threadIdx.x == 0) sh.finite_all = finite_sum;
  bad = __syncthreads_or(bad);
  if (bad || sh.finite_all == 0) {
    if (threadIdx.x == 0) *out.count = !bad && out.empty_ok ? 0 : kCandidatesBadRow;
    return;
  }

  // Radix descent to the key of the k-th largest finite logit: `remaining` is
  // its rank among the keys that match `prefix` on the digits found so far.
  uint32_t prefix = 0, mask = 0;
  int32_t remaining = min(max(k, 1), sh.finite_all);
  for (int shift = 32 - kDigitBits; shift >= 0; shift -= kDigitBits) {
    for (int d = threadIdx.x; d < kDigits; d += kThreads) sh.hist[d] = 0;
    __syncthreads();
    for_each([&](int, float x) {
      if (x == -INFINITY) return;
      const uint32_t key = order_key(x);
      if ((key & mask) == prefix) atomicAdd(&sh.hist[(key >> shift) & (kDigits - 1)], 1);
    });
    __syncthreads();
    if (threadIdx.x < 32) {
      // Lane j holds digits kDigits-1-j*8 down to kDigits-8-j*8 (lane 0 the
      // highest); the first lane whose inclusive count from the top reaches
      // `remaining` walks its digits.
      const int lane = threadIdx.x, top = kDigits - 1 - lane * kDigitsPerLane;
      int32_t mine = 0;
#pragma unroll
      for (int j = 0; j < kDigitsPerLane; ++j) mine += sh.hist[top - j];
      int32_t incl = mine;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int32_t up = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += up;
      }
      const unsigned reached = __ballot_sync(0xffffffffu, incl >= remaining);
      if (lane == __ffs(reached) - 1) {
        int32_t above = incl - mine;
        int d = top;
        for (int j = 0; j < kDigitsPerLane - 1; ++j, --d) {
          if (above + sh.hist[d] >= remaining) break;
          above += sh.hist[d];
        }
        sh.found_prefix = prefix | (static_cast<uint32_t>(d) << shift);
        sh.found_remaining = remaining - above;
      }
    }
    __syncthreads();
    prefix = sh.found_prefix;
    remaining = sh.found_remaining;
    mask |= static_cast<uint32_t>(kDigits - 1) << shift;
  }
  const uint32_t threshold = prefix;  // every digit found: the k-th largest key

  // Compaction in id order: each thread's contiguous range, one block scan.
  auto is_candidate = [&](float x) { return x != -INFINITY && order_key(x) >= threshold; };
  int32_t mine = 0;
  for_each_in_order([&](int, float x) { mine += is_candidate(x); });
  int32_t at = 0, total = 0;
  SelectShared::Scan(sh.temp.scan).ExclusiveSum(mine, at, total);
  if (total > out.cap) {
    if (threadIdx.x == 0) *out.count = kCandidatesOverflow;
    return;
  }
  for_each_in_order([&](int i, float x) {
    if (!is_candidate(x)) return;
    out.ids[at] = i;
    out.values[at] = x;
    ++at;
  });
  if (threadIdx.x == 0) *out.count = total;
}

// Logits [0, n) of `l` into v (ITEMS a thread, thread t's from t * ITEMS),
// -inf past n; `aligned`: l is 16-byte aligned and n a multiple of 4.
template <int ITEMS>
__device__ __forceinline__ void load_items(const float *l, int n, bool aligned, float (&v)[ITEMS]) {
  const int first = static_cast<int>(threadIdx.x) * ITEMS;
  if (ITEMS % 4 == 0 && aligned) {  // whole float4s in or out
#pragma unroll
    for (int q = 0; q < ITEMS / 4; ++q) {
      const float4 x = first + 4 * q < n ? *reinterpret_cast<const float4 *>(l + first + 4 * q)
                                         : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
      v[4 * q] = x.x, v[4 * q + 1] = x.y, v[4 * q + 2] = x.z, v[4 * q + 3] = x.w;
    }
  } else {
#pragma unroll
    for (int e = 0; e < ITEMS; ++e) v[e] = first + e < n ? l[first + e] : -INFINITY;
  }
}

// The selection over logits held ITEMS a thread, ids id0 + position.
template <int ITEMS>
__device__ void select_held(const float (&v)[ITEMS], int id0, int32_t k, const SelectOut &out,
                            SelectShared &sh) {
  const int first = id0 + static_cast<int>(threadIdx.x) * ITEMS;
  auto each = [&](auto &&f) {
#pragma unroll
    for (int e = 0; e < ITEMS; ++e) f(first + e, v[e]);
  };
  select_candidates(each, each, k, out, sh);
}

// The selection over a row of `vocab` logits read from memory at every pass.
__device__ void select_in_memory(const float *l, int vocab, int32_t k, const SelectOut &out,
                                 SelectShared &sh) {
  auto each = [&](auto &&f) {
    for (int i = threadIdx.x; i < vocab; i += kThreads) f(i, l[i]);
  };
  auto each_in_order = [&](auto &&f) {
    const int chunk = (vocab + kThreads - 1) / kThreads;
    const int begin = min(vocab, static_cast<int>(threadIdx.x) * chunk);
    const int end = min(vocab, begin + chunk);
    for (int i = begin; i < end; ++i) f(i, l[i]);
  };
  select_candidates(each, each_in_order, k, out, sh);
}

__device__ SelectOut row_out(const CandidateParams &p, int row) {
  const int64_t at = static_cast<int64_t>(row) * p.cap;
  return SelectOut{p.count + row, p.ids + at, p.values + at, p.cap, false};
}

// ITEMS > 0: thread t keeps logits [t * ITEMS, (t + 1) * ITEMS) in registers,
// read once, padded with -inf past the vocabulary (which every pass skips),
// for vocabularies up to ITEMS * kThreads: each of the six passes over the
// row then costs no memory round trip (22m's 8192: 18.8 us a launch of 16
// rows before, ncu on the H200). ITEMS = 0: every pass reads the row.
template <int ITEMS>
__global__ void __launch_bounds__(kThreads) candidates_kernel(CandidateParams p) {
  pdl_enter();
  __shared__ SelectShared sh;
  const int row = blockIdx.x;
  const float *l = p.logits + static_cast<int64_t>(row) * p.vocab;
  if constexpr (ITEMS > 0) {
    float v[ITEMS];
    load_items<ITEMS>(l, p.vocab, (p.vocab & 3) == 0, v);
    select_held<ITEMS>(v, 0, p.k[row], row_out(p, row), sh);
  } else {
    select_in_memory(l, p.vocab, p.k[row], row_out(p, row), sh);
  }
}

// Long rows in two kernels (CandidateParams::scratch). Every logit at or
// above the row's k-th largest is at or above its own chunk's k-th largest
// (fewer than k logits of the chunk exceed it), so the chunks' candidates
// hold the row's, and at least min(k, finite logits) finite ones: the k-th
// largest among them is the row's, and the candidates among them are the
// row's. First each block selects one chunk's candidates from registers;
// then one block per row gathers them (in chunk order: ascending ids) and
// selects again. A chunk with more tied candidates than `cap` sends its row
// to the one-block selection from memory, as before.
constexpr int kChunkItems = 16;
constexpr int kChunk = kChunkItems * kThreads;
constexpr int kGatherItems = 8;  // gathered candidates a thread: up to 4096 a row

__host__ __device__ constexpr int chunks_of(int vocab) {
  return (vocab + kChunk - 1) / kChunk;
}
__host__ __device__ constexpr int64_t chunk_ints(int cap) {
  return 1 + 2 * int64_t{cap};  // count, ids, values
}

__global__ void __launch_bounds__(kThreads) chunk_candidates_kernel(CandidateParams p) {
  pdl_enter();
  __shared__ SelectShared sh;
  const int c = blockIdx.x, row = blockIdx.y, chunks = chunks_of(p.vocab);
  const int64_t first = static_cast<int64_t>(c) * kChunk;
  const float *l = p.logits + static_cast<int64_t>(row) * p.vocab + first;
  const int n = min(kChunk, p.vocab - static_cast<int>(first));
  float v[kChunkItems];
  load_items<kChunkItems>(l, n, (p.vocab & 3) == 0, v);
  int32_t *list = p.scratch + (static_cast<int64_t>(row) * chunks + c) * chunk_ints(p.cap);
  const SelectOut out{list, list + 1, reinterpret_cast<float *>(list + 1 + p.cap), p.cap, true};
  select_held<kChunkItems>(v, static_cast<int>(first), p.k[row], out, sh);
}

__global__ void __launch_bounds__(kThreads) gather_candidates_kernel(CandidateParams p) {
  pdl_enter();
  __shared__ SelectShared sh;
  __shared__ int32_t list_start[64 + 1];  // chunks_of(vocab) <= 64 (the launcher's condition)
  __shared__ int32_t status;
  const int row = blockIdx.x, chunks = chunks_of(p.vocab);
  const int32_t *lists = p.scratch + static_cast<int64_t>(row) * chunks * chunk_ints(p.cap);
  auto list = [&](int c) { return lists + c * chunk_ints(p.cap); };
  if (threadIdx.x == 0) {
    int32_t at = 0, st = 0;
    for (int c = 0; c < chunks; ++c) {
      const int32_t count = list(c)[0];
      list_start[c] = at;
      if (count == kCandidatesBadRow) st = kCandidatesBadRow;
      if (count == kCandidatesOverflow && st == 0) st = kCandidatesOverflow;
      at += max(count, 0);
    }
    list_start[chunks] = at;
    if (st == 0 && at > kGatherItems * kThreads) st = kCandidatesOverflow;
    status = st;
  }
  __syncthreads();
  if (status == kCandidatesBadRow) {
    if (threadIdx.x == 0) p.count[row] = kCandidatesBadRow;
    return;
  }
  if (status == kCandidatesOverflow) {  // ties past a chunk's cap: the whole row, from memory
    select_in_memory(p.logits + static_cast<int64_t>(row) * p.vocab, p.vocab, p.k[row],
                     row_out(p, row), sh);
    return;
  }
  // Thread t holds gathered candidates [t * kGatherItems, ...) in order.
  float v[kGatherItems];
  int32_t id[kGatherItems];
  int c = 0;
#pragma unroll
  for (int e = 0; e < kGatherItems; ++e) {
    const int g = static_cast<int>(threadIdx.x) * kGatherItems + e;
    v[e] = -INFINITY;
    id[e] = 0;
    if (g >= list_start[chunks]) continue;
    while (list_start[c + 1] <= g) ++c;
    const int j = g - list_start[c];
    id[e] = list(c)[1 + j];
    v[e] = reinterpret_cast<const float *>(list(c) + 1 + p.cap)[j];
  }
  auto each = [&](auto &&f) {
#pragma unroll
    for (int e = 0; e < kGatherItems; ++e) f(id[e], v[e]);
  };
  select_candidates(each, each, p.k[row], row_out(p, row), sh);
}

}  // namespace

int64_t logit_candidates_scratch_ints(int32_t rows, int32_t vocab, int32_t cap) {
  return int64_t{rows} * chunks_of(vocab) * chunk_ints(cap);
}

cudaError_t logit_candidates(const CandidateParams &p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.rows < 0 || p.vocab <= 0 || p.cap < 1 || p.logits == nullptr || p.k == nullptr ||
      p.count == nullptr || p.ids == nullptr || p.values == nullptr)
    return cudaErrorInvalidValue;
  static const bool registers = variant_enabled("VEGAS_CUDA_CANDIDATES_IN_REGISTERS");
  if (registers && p.vocab <= kChunk)
    return launch_kernel(candidates_kernel<kChunkItems>, p.rows, kThreads, 0, stream, p);
  // VEGAS_CUDA_CANDIDATES_CHUNKS=0 keeps long rows on one block each (A/B).
  static const bool chunked = variant_enabled("VEGAS_CUDA_CANDIDATES_CHUNKS");
  if (!registers || !chunked || p.scratch == nullptr || chunks_of(p.vocab) > 64 || p.cap > kThreads)
    return launch_kernel(candidates_kernel<0>, p.rows, kThreads, 0, stream, p);
  const cudaError_t e =
      launch_kernel(chunk_candidates_kernel,
                    dim3(static_cast<unsigned>(chunks_of(p.vocab)), static_cast<unsigned>(p.rows)),
                    kThreads, 0, stream, p);
  if (e != cudaSuccess) return e;
  return launch_kernel(gather_candidates_kernel, p.rows, kThreads, 0, stream, p);
}

}  // namespace vegas::kernels
