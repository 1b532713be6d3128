#include <climits>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda_utils.cuh"
#include "sampling.cuh"
#include "sampling_rng.cuh"

namespace vegas::kernels {

namespace {

constexpr int kThreads = 512;
constexpr int kItems = 8;  // consecutive elements per thread and tile
constexpr int kTile = kThreads * kItems;
constexpr int kBins = 2048;  // 11-bit digits: levels of 11, 11 and 10 key bits
constexpr int kBinsPerThread = kBins / kThreads;
constexpr int kLevels = 3;
constexpr int kSortItems = 4;
constexpr int kCapacity = kThreads * kSortItems;  // tokens staged in shared memory
// Top-p narrowing buckets: width in (max - logit) / temperature, so a bucket's
// weights lie within a factor exp(kBucketWidth); the last bucket is open.
constexpr float kBucketWidth = 0.01f;

__device__ __forceinline__ int level_shift(int level) {
  return level == 0 ? 21 : (level == 1 ? 10 : 0);
}
__device__ __forceinline__ int level_bits(int level) {
  return level == 2 ? 10 : 11;
}

// A 32-bit key whose unsigned order is the float order (-0 folded onto +0,
// since the host compares -0 == +0). -inf has the smallest key of any
// non-NaN value, so "finite" below is "key > key(-inf)".
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

struct Stats {
  float max;
  int32_t arg;  // lowest index of the max
  int32_t n_finite;
  int32_t bad;  // NaN or +inf seen
};
struct StatsOp {
  __device__ Stats operator()(const Stats &a, const Stats &b) const {
    Stats r;
    const bool take_b = b.max > a.max || (b.max == a.max && b.arg < a.arg);
    r.max = take_b ? b.max : a.max;
    r.arg = take_b ? b.arg : a.arg;
    r.n_finite = a.n_finite + b.n_finite;
    r.bad = a.bad | b.bad;
    return r;
  }
};

struct MassCount {
  double mass;
  int32_t count;
};
struct MassCountSum {
  __device__ MassCount operator()(const MassCount &a, const MassCount &b) const {
    return MassCount{a.mass + b.mass, a.count + b.count};
  }
};
struct MaxOp {
  __device__ int32_t operator()(int32_t a, int32_t b) const { return a > b ? a : b; }
};

// The bin of a histogram where the cumulative value from the top reaches the target.
struct Crossing {
  int32_t bin;  // -1: the target is never reached
  MassCount above;
  MassCount in_bin;
};

// Warp-scan block scans: their temporary storage is a few hundred bytes.
using ScanMC = cub::BlockScan<MassCount, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;
using ScanD = cub::BlockScan<double, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;
using ScanI = cub::BlockScan<int32_t, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;
// Sorts (logit key << 11 | 2047 - position): descending logit, then ascending
// position (= ascending id), whatever the sort's stability.
using Sort = cub::BlockRadixSort<uint64_t, kThreads, kSortItems>;
constexpr int kPosBits = 11;
static_assert(kCapacity <= (1 << kPosBits), "staged positions must fit the sort key");

struct Histogram {
  double mass[kBins];
  int32_t count[kBins];
};

struct Shared {
  union {
    cub::BlockReduce<Stats, kThreads>::TempStorage stats;
    cub::BlockReduce<double, kThreads>::TempStorage sum;
    cub::BlockReduce<int32_t, kThreads>::TempStorage max_id;
    ScanMC::TempStorage scan_mc;
    ScanD::TempStorage scan_d;
    ScanI::TempStorage scan_i;
  } cub;
  union {
    Histogram hist;
    Sort::TempStorage sort;  // the staged path sorts instead of using histograms
  };
  float logit[kCapacity];
  int32_t id[kCapacity];
  Stats stats;
  Crossing crossing;
  double value;
  int32_t position;
  int32_t tie_take;
  uint32_t kth;
};

// The elements a pass reads: the whole row (ids are indices) or the tokens
// staged in shared memory (in ascending id order).
struct Source {
  const float *row = nullptr;
  const float *logit = nullptr;
  const int32_t *id = nullptr;
  int32_t n = 0;
  bool staged = false;
  __device__ int32_t id_at(int32_t i) const { return staged ? id[i] : i; }
};

// The kItems elements of thread `threadIdx.x` in the tile at `base`; ids of
// elements past the end are -1.
__device__ __forceinline__ void load_items(const Source &s, int32_t base, float (&v)[kItems],
                                           int32_t (&ids)[kItems]) {
  const int32_t i0 = base + threadIdx.x * kItems;
  if (!s.staged && i0 + kItems <= s.n && (reinterpret_cast<uintptr_t>(s.row + i0) & 15) == 0) {
    const float4 a = *reinterpret_cast<const float4 *>(s.row + i0);
    const float4 b = *reinterpret_cast<const float4 *>(s.row + i0 + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
#pragma unroll
    for (int k = 0; k < kItems; ++k) ids[k] = i0 + k;
    return;
  }
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int32_t i = i0 + k;
    const bool in = i < s.n;
    v[k] = in ? (s.staged ? s.logit[i] : s.row[i]) : -INFINITY;
    ids[k] = in ? (s.staged ? s.id[i] : i) : -1;
  }
}

// The row's rule as the passes apply it.
struct Rule {
  float max = 0.0f;
  float temperature = 1.0f;
  float min_p = 0.0f;
  uint32_t cand_key = 0;         // top-k: keys below are out
  uint32_t nucleus_key = 0;      // top-p: keys below are out, ...
  int32_t nucleus_id = INT_MAX;  // ... and of keys equal to nucleus_key, ids above
  float scale = 1.0f;            // 1 / the kept mass (step 6)

  // Temperature weight relative to the maximum, as the host computes it.
  __device__ float weight(float v) const { return expf((v - max) / temperature); }
  __device__ bool candidate(uint32_t key) const { return key >= cand_key; }
  __device__ bool in_nucleus(uint32_t key, int32_t id) const {
    return key > nucleus_key || (key == nucleus_key && id <= nucleus_id);
  }
  // The weight after steps 3-5 (0 outside the kept set); v must be finite.
  __device__ float kept_weight(float v, int32_t id) const {
    const uint32_t key = order_key(v);
    if (!candidate(key) || !in_nucleus(key, id)) return 0.0f;
    const float w = weight(v);
    return w > 0.0f && w >= min_p ? w : 0.0f;
  }
};

__device__ Stats row_stats(const Source &s, Shared &sh) {
  Stats t{-INFINITY, INT_MAX, 0, 0};
  for (int32_t base = 0; base < s.n; base += kTile) {
    float v[kItems];
    int32_t ids[kItems];
    load_items(s, base, v, ids);
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      if (ids[k] < 0) continue;
      t.bad |= !(v[k] < INFINITY);
      t.n_finite += v[k] > -INFINITY;
      if (v[k] > t.max) {  // indices grow within a thread: the first max is kept
        t.max = v[k];
        t.arg = ids[k];
      }
    }
  }
  const Stats total = cub::BlockReduce<Stats, kThreads>(sh.cub.stats).Reduce(t, StatsOp());
  if (threadIdx.x == 0) sh.stats = total;
  __syncthreads();
  const Stats r = sh.stats;
  __syncthreads();
  return r;
}

// Sum over the source of value(v, id) for finite v.
template <class Value>
__device__ double block_total(const Source &s, Shared &sh, Value value) {
  double sum = 0.0;
  for (int32_t base = 0; base < s.n; base += kTile) {
    float v[kItems];
    int32_t ids[kItems];
    load_items(s, base, v, ids);
#pragma unroll
    for (int k = 0; k < kItems; ++k)
      if (ids[k] >= 0 && v[k] > -INFINITY) sum += value(v[k], ids[k]);
  }
  const double total = cub::BlockReduce<double, kThreads>(sh.cub.sum).Sum(sum);
  if (threadIdx.x == 0) sh.value = total;
  __syncthreads();
  const double r = sh.value;
  __syncthreads();
  return r;
}

// count[d] += 1 where `in`, one atomic per distinct bin of the warp (logits
// crowd into few bins, and same-address shared atomics serialise). Every lane
// of the warp must call it.
__device__ __forceinline__ void add_count(int32_t *count, uint32_t d, bool in) {
  const uint32_t peers = __match_any_sync(0xffffffffu, in ? d : 0xffffffffu);
  if (in && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&count[d], __popc(peers));
}

// count[d] += 1 and mass[d] += w where `in`: one bin of the warp at a time,
// its lanes' weights summed by shuffles, one atomic each (no float atomics
// contend). Every lane of the warp must call it.
__device__ __forceinline__ void add_mass_count(Histogram &h, uint32_t d, double w, bool in) {
  bool pending = in;
  uint32_t left = __ballot_sync(0xffffffffu, pending);
  while (left) {
    const int src = __ffs(left) - 1;
    const uint32_t bin = __shfl_sync(0xffffffffu, d, src);
    const bool mine = pending && d == bin;
    const uint32_t group = __ballot_sync(0xffffffffu, mine);
    double x = mine ? w : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    if ((threadIdx.x & 31) == static_cast<uint32_t>(src)) {
      atomicAdd(&h.count[bin], __popc(group));
      atomicAdd(&h.mass[bin], x);
    }
    pending = pending && !mine;
    left &= ~group;
  }
}

// Histogram of digit `level` of the keys of the finite elements whose top
// `prefix_bits` key bits equal `prefix` and that pass `keep`: counts, and the
// temperature weights when with_mass.
template <class Keep>
__device__ void histogram(const Source &s, Shared &sh, const Rule &rule, int level, uint32_t prefix,
                          int prefix_bits, bool with_mass, Keep keep) {
  for (int b = threadIdx.x; b < kBins; b += kThreads) {
    sh.hist.mass[b] = 0.0;
    sh.hist.count[b] = 0;
  }
  __syncthreads();
  const int shift = level_shift(level);
  const uint32_t mask = (1u << level_bits(level)) - 1u;
  for (int32_t base = 0; base < s.n; base += kTile) {
    float v[kItems];
    int32_t ids[kItems];
    load_items(s, base, v, ids);
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const uint32_t key = order_key(v[k]);
      const bool in = ids[k] >= 0 && v[k] > -INFINITY &&
                      (prefix_bits == 0 || (key >> (32 - prefix_bits)) == prefix) && keep(key);
      const uint32_t d = (key >> shift) & mask;
      if (with_mass) {  // the slow path only: whole rows that stay large
        add_mass_count(sh.hist, d, in ? static_cast<double>(rule.weight(v[k])) : 0.0, in);
      } else {
        add_count(sh.hist.count, d, in);
      }
    }
  }
  __syncthreads();
}

// Walking the bins from the highest down, the first whose inclusive
// cumulative value (base plus counts, or plus masses) reaches `target`.
__device__ Crossing descend(Shared &sh, int n_bins, MassCount base, double target, bool by_count) {
  MassCount own[kBinsPerThread];
  MassCount sum{0.0, 0};
#pragma unroll
  for (int j = 0; j < kBinsPerThread; ++j) {
    const int b = n_bins - 1 - (threadIdx.x * kBinsPerThread + j);
    own[j] = b >= 0 ? MassCount{sh.hist.mass[b], sh.hist.count[b]} : MassCount{0.0, 0};
    sum = MassCountSum()(sum, own[j]);
  }
  if (threadIdx.x == 0) sh.crossing.bin = -1;
  __syncthreads();
  MassCount above;
  ScanMC(sh.cub.scan_mc).ExclusiveScan(sum, above, MassCount{0.0, 0}, MassCountSum());
  int claimed = -1;
  MassCount claimed_above{0.0, 0}, claimed_in{0.0, 0};
#pragma unroll
  for (int j = 0; j < kBinsPerThread; ++j) {
    const int b = n_bins - 1 - (threadIdx.x * kBinsPerThread + j);
    const MassCount incl = MassCountSum()(above, own[j]);
    const double before = by_count ? double(base.count + above.count) : base.mass + above.mass;
    const double after = by_count ? double(base.count + incl.count) : base.mass + incl.mass;
    if (b >= 0 && claimed < 0 && before < target && after >= target) {
      claimed = b;
      claimed_above = above;
      claimed_in = own[j];
    }
    above = incl;
  }
  if (claimed >= 0) atomicMax(&sh.crossing.bin, claimed);  // rounding could make two claims
  __syncthreads();
  if (claimed >= 0 && claimed == sh.crossing.bin) {
    sh.crossing.above = claimed_above;
    sh.crossing.in_bin = claimed_in;
  }
  __syncthreads();
  const Crossing c = sh.crossing;
  __syncthreads();
  return c;
}

// The first element, in source order, where the running sum of value(v, id)
// over finite elements exceeds `target`; -1 if it never does. Returns its position.
template <class Value>
__device__ int32_t first_crossing(const Source &s, Shared &sh, double target, Value value) {
  if (threadIdx.x == 0) sh.position = INT_MAX;
  __syncthreads();
  double carry = 0.0;
  for (int32_t base = 0; base < s.n; base += kTile) {
    float v[kItems];
    int32_t ids[kItems];
    load_items(s, base, v, ids);
    double vals[kItems];
    double sum = 0.0;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      vals[k] = ids[k] >= 0 && v[k] > -INFINITY ? value(v[k], ids[k]) : 0.0;
      sum += vals[k];
    }
    double before, aggregate;
    ScanD(sh.cub.scan_d).ExclusiveSum(sum, before, aggregate);
    const double start = carry + before;
    if (target < start + sum) {
      // The same sequential partial sums as `sum`, so a claim always finds its element.
      double part = 0.0;
      for (int k = 0; k < kItems; ++k) {
        part += vals[k];
        if (vals[k] > 0.0 && target < start + part) {
          atomicMin(&sh.position, base + static_cast<int32_t>(threadIdx.x) * kItems + k);
          break;
        }
      }
    }
    carry += aggregate;
    __syncthreads();
    if (sh.position != INT_MAX) break;  // read by all before any later write
  }
  const int32_t pos = sh.position;
  __syncthreads();
  return pos == INT_MAX ? -1 : pos;
}

// Copies the finite elements that pass `keep(v)` to shared memory in id order.
template <class Keep>
__device__ Source stage(const Source &row, Shared &sh, Keep keep) {
  int32_t carry = 0;
  for (int32_t base = 0; base < row.n; base += kTile) {
    float v[kItems];
    int32_t ids[kItems];
    load_items(row, base, v, ids);
    int32_t n = 0;
#pragma unroll
    for (int k = 0; k < kItems; ++k) n += ids[k] >= 0 && v[k] > -INFINITY && keep(v[k]);
    int32_t before, aggregate;
    ScanI(sh.cub.scan_i).ExclusiveSum(n, before, aggregate);
    int32_t at = carry + before;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      if (ids[k] >= 0 && v[k] > -INFINITY && keep(v[k])) {
        if (at < kCapacity) {
          sh.logit[at] = v[k];
          sh.id[at] = ids[k];
        }
        ++at;
      }
    }
    carry += aggregate;
    __syncthreads();
  }
  Source s;
  s.logit = sh.logit;
  s.id = sh.id;
  s.n = carry < kCapacity ? carry : kCapacity;
  s.staged = true;
  return s;
}

// Top-k narrowing: descends by counts toward the k-th largest key, stopping as
// soon as every element at or above the current bin fits in shared memory;
// returns that staged source, or the row.
__device__ Source narrow_top_k(const Source &row, Shared &sh, const Rule &rule, int32_t k) {
  uint32_t prefix = 0;
  int bits = 0;
  MassCount base{0.0, 0};
  for (int level = 0; level < kLevels; ++level) {
    histogram(row, sh, rule, level, prefix, bits, false, [](uint32_t) { return true; });
    const Crossing c = descend(sh, 1 << level_bits(level), base, k, true);
    if (c.bin < 0) return row;  // cannot happen for k < n_finite
    base = MassCountSum()(base, c.above);
    prefix = (prefix << level_bits(level)) | static_cast<uint32_t>(c.bin);
    bits += level_bits(level);
    if (base.count + c.in_bin.count <= kCapacity) {
      const uint32_t min_key = prefix << (32 - bits);
      return stage(row, sh, [min_key](float v) { return order_key(v) >= min_key; });
    }
  }
  return row;
}

__device__ __forceinline__ uint32_t bucket_of(float v, const Rule &rule) {
  const float z = (rule.max - v) / rule.temperature;
  return z < kBins * kBucketWidth ? min(static_cast<uint32_t>(z / kBucketWidth), kBins - 1u)
                                  : kBins - 1u;
}

// Top-p narrowing without float atomics: counts per bucket of (max - logit) /
// temperature give a lower bound of the mass above each bucket edge; the
// first edge whose bound reaches top_p * total (total summed exactly here)
// has the whole nucleus above it. Stages those tokens when they fit.
__device__ Source narrow_top_p(const Source &row, Shared &sh, const Rule &rule, float top_p,
                               double *total) {
  for (int b = threadIdx.x; b < kBins; b += kThreads) sh.hist.count[b] = 0;
  __syncthreads();
  double sum = 0.0;
  for (int32_t base = 0; base < row.n; base += kTile) {
    float v[kItems];
    int32_t ids[kItems];
    load_items(row, base, v, ids);
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const bool in = ids[k] >= 0 && v[k] > -INFINITY;
      if (in) sum += rule.weight(v[k]);
      add_count(sh.hist.count, in ? bucket_of(v[k], rule) : 0u, in);
    }
  }
  const double t = cub::BlockReduce<double, kThreads>(sh.cub.sum).Sum(sum);
  if (threadIdx.x == 0) sh.value = t;
  __syncthreads();
  *total = sh.value;
  const double target = static_cast<double>(top_p) * *total;
  // Lower bounds (1e-4 below, for the rounding of the weights and of z).
  for (int b = threadIdx.x; b < kBins; b += kThreads)
    sh.hist.mass[b] =
        b == kBins - 1 ? 0.0 : sh.hist.count[b] * exp(-(b + 1) * double(kBucketWidth)) * (1 - 1e-4);
  __syncthreads();
  // descend() walks bins downward; the buckets rise with distance from the
  // max, so mirror them.
  for (int b = threadIdx.x; b < kBins / 2; b += kThreads) {
    const int m = kBins - 1 - b;
    const double tm = sh.hist.mass[b];
    sh.hist.mass[b] = sh.hist.mass[m];
    sh.hist.mass[m] = tm;
    const int32_t tc = sh.hist.count[b];
    sh.hist.count[b] = sh.hist.count[m];
    sh.hist.count[m] = tc;
  }
  __syncthreads();
  const Crossing c = descend(sh, kBins, MassCount{0.0, 0}, target, false);
  if (c.bin < 0 || c.above.count + c.in_bin.count > kCapacity) return row;
  const uint32_t last = kBins - 1 - c.bin;
  return stage(row, sh, [last, &rule](float v) { return bucket_of(v, rule) <= last; });
}

// The staged path of top-k and top-p: sorts the staged tokens (descending
// logit, then ascending id: they are staged in id order) and masks with -inf
// those outside the top-k candidates or the nucleus.
// total_all: the candidates' mass when some are not staged, else < 0.
__device__ void staged_rules(const Source &s, Shared &sh, const Rule &rule, int32_t top_k,
                             float top_p, double total_all) {
  constexpr uint64_t kPosMask = (1u << kPosBits) - 1;
  uint64_t sorted[kSortItems];
#pragma unroll
  for (int j = 0; j < kSortItems; ++j) {
    const int32_t at = threadIdx.x * kSortItems + j;
    sorted[j] = at < s.n ? (uint64_t{order_key(sh.logit[at])} << kPosBits) | (kPosMask - at) : 0;
  }
  __syncthreads();  // the histograms share the sort's storage
  Sort(sh.sort).SortDescending(sorted, 0, 32 + kPosBits);
  __syncthreads();
  uint32_t keys[kSortItems];
  int32_t pos[kSortItems];
#pragma unroll
  for (int j = 0; j < kSortItems; ++j) {
    keys[j] = static_cast<uint32_t>(sorted[j] >> kPosBits);
    pos[j] = static_cast<int32_t>(kPosMask - (sorted[j] & kPosMask));
  }
  // Rank r = threadIdx.x * kSortItems + j; ranks >= s.n are padding.
  uint32_t kth = 0;
  if (top_k > 0) {
#pragma unroll
    for (int j = 0; j < kSortItems; ++j)
      if (threadIdx.x * kSortItems + j == top_k - 1) sh.kth = keys[j];
    __syncthreads();
    kth = sh.kth;
  }
  bool keep[kSortItems];
  double w[kSortItems];
  double sum = 0.0;
#pragma unroll
  for (int j = 0; j < kSortItems; ++j) {
    keep[j] = threadIdx.x * kSortItems + j < s.n && keys[j] >= kth;
    w[j] = keep[j] ? rule.weight(sh.logit[pos[j]]) : 0.0;
    sum += w[j];
  }
  if (top_p < 1.0f) {
    double before, aggregate;
    ScanD(sh.cub.scan_d).ExclusiveSum(sum, before, aggregate);
    const double target = static_cast<double>(top_p) * (total_all >= 0.0 ? total_all : aggregate);
    // The host adds tokens in rank order while the sum is below the target.
#pragma unroll
    for (int j = 0; j < kSortItems; ++j) {
      keep[j] = keep[j] && before < target;
      before += w[j];
    }
  }
  __syncthreads();  // every weight read before any logit is masked
#pragma unroll
  for (int j = 0; j < kSortItems; ++j)
    if (threadIdx.x * kSortItems + j < s.n && !keep[j]) sh.logit[pos[j]] = -INFINITY;
  __syncthreads();
}

// Exact key of the k-th largest finite element of the source.
__device__ uint32_t kth_key(const Source &s, Shared &sh, const Rule &rule, int32_t k) {
  uint32_t prefix = 0;
  int bits = 0;
  MassCount base{0.0, 0};
  for (int level = 0; level < kLevels; ++level) {
    histogram(s, sh, rule, level, prefix, bits, false, [](uint32_t) { return true; });
    const Crossing c = descend(sh, 1 << level_bits(level), base, k, true);
    if (c.bin < 0) return 0;  // not reached: cannot happen for k < n_finite
    base = MassCountSum()(base, c.above);
    prefix = (prefix << level_bits(level)) | static_cast<uint32_t>(c.bin);
    bits += level_bits(level);
  }
  return prefix;
}

// Top-p: sets rule->nucleus_key/nucleus_id so that the kept candidates are the
// host's nucleus: ranked by descending logit then ascending id, the shortest
// prefix whose mass reaches top_p * total.
__device__ void find_nucleus(const Source &s, Shared &sh, Rule *rule, float top_p,
                             double total_all) {
  const Rule r = *rule;
  auto cand = [&r](uint32_t key) { return r.candidate(key); };
  uint32_t prefix = 0;
  int bits = 0;
  MassCount base{0.0, 0};
  double target = 0.0;
  Crossing c{-1, {0.0, 0}, {0.0, 0}};
  for (int level = 0; level < kLevels; ++level) {
    histogram(s, sh, r, level, prefix, bits, true, cand);
    if (level == 0) {
      double total = total_all;
      if (total < 0.0) {  // the source holds every candidate: total them here
        double part = 0.0;
        for (int b = threadIdx.x; b < kBins; b += kThreads) part += sh.hist.mass[b];
        const double t = cub::BlockReduce<double, kThreads>(sh.cub.sum).Sum(part);
        if (threadIdx.x == 0) sh.value = t;
        __syncthreads();
        total = sh.value;
        __syncthreads();
      }
      target = static_cast<double>(top_p) * total;
    }
    c = descend(sh, 1 << level_bits(level), base, target, false);
    if (c.bin < 0) {  // (rounding) never reached: the current bin stays whole
      if (bits > 0) rule->nucleus_key = prefix << (32 - bits);
      return;
    }
    base = MassCountSum()(base, c.above);
    prefix = (prefix << level_bits(level)) | static_cast<uint32_t>(c.bin);
    bits += level_bits(level);
  }
  // prefix is now the key of the crossing logit; its ties are taken in id order
  // until the mass reaches the target, as the host's sequential sum does.
  rule->nucleus_key = prefix;
  rule->nucleus_id = INT_MAX;
  if (c.in_bin.count <= 1) return;
  if (threadIdx.x == 0) {
    const float w = r.weight(key_value(prefix));
    double cum = base.mass;
    int32_t take = 0;
    while (take < c.in_bin.count) {
      cum += w;
      ++take;
      if (cum >= target) break;
    }
    sh.tie_take = take;
  }
  __syncthreads();
  const int32_t take = sh.tie_take;
  __syncthreads();
  if (take >= c.in_bin.count) return;
  const uint32_t tie_key = prefix;
  const int32_t pos = first_crossing(s, sh, take - 0.5, [&r, tie_key](float v, int32_t) {
    const uint32_t key = order_key(v);
    return key == tie_key && r.candidate(key) ? 1.0 : 0.0;
  });
  if (pos >= 0) rule->nucleus_id = s.id_at(pos);
}

__global__ void __launch_bounds__(kThreads) sample_kernel(SampleParams p) {
  pdl_enter();
  __shared__ Shared sh;
  const SamplingRow rr = p.rules[blockIdx.x];
  int32_t *out = p.out + blockIdx.x;
  const bool valid = rr.temperature >= 0.0f && rr.temperature < INFINITY && rr.top_k >= 0 &&
                     rr.top_p > 0.0f && rr.top_p <= 1.0f && rr.min_p >= 0.0f && rr.min_p <= 1.0f;
  if (!valid) {
    if (threadIdx.x == 0) *out = kSampleBadParams;
    return;
  }
  Source row;
  row.row = p.logits + static_cast<int64_t>(blockIdx.x) * p.vocab;
  row.n = p.vocab;

  // The host's scan: errors, then greedy is the first maximum.
  const Stats st = row_stats(row, sh);
  if (st.bad || st.n_finite == 0 || rr.temperature <= 0.0f) {
    if (threadIdx.x == 0)
      *out = st.bad ? kSampleBadLogit : st.n_finite == 0 ? kSampleAllMasked : st.arg;
    return;
  }
  Rule rule;
  rule.max = st.max;
  rule.temperature = rr.temperature;
  rule.min_p = rr.min_p;
  const bool top_k = rr.top_k > 0 && rr.top_k < st.n_finite;
  const bool top_p = rr.top_p < 1.0f;

  // Narrow to the tokens that can matter, then apply the rules exactly.
  Source s = row;
  double total_all = -1.0;  // the candidates' mass, when s no longer holds them all
  if (top_k) {
    s = narrow_top_k(row, sh, rule, rr.top_k);
  } else if (top_p) {
    double total = 0.0;
    s = narrow_top_p(row, sh, rule, rr.top_p, &total);
    if (s.staged) total_all = total;
  }
  if (s.staged) {
    staged_rules(s, sh, rule, top_k ? rr.top_k : 0, rr.top_p, total_all);
  } else {
    if (top_k) rule.cand_key = kth_key(s, sh, rule, rr.top_k);
    if (top_p) find_nucleus(s, sh, &rule, rr.top_p, -1.0);
  }

  // Steps 5-6 and the host's inverse-CDF draw over the kept set in id order.
  const Rule kept = rule;
  const double kept_total =
      block_total(s, sh, [&kept](float v, int32_t id) { return double(kept.kept_weight(v, id)); });
  const float scale = static_cast<float>(1.0 / kept_total);
  auto prob = [&kept, scale](float v, int32_t id) {
    return static_cast<double>(kept.kept_weight(v, id) * scale);
  };
  const double total = block_total(s, sh, prob);
  const double target = uniform(rr.seed, rr.counter) * total;
  const int32_t pos = first_crossing(s, sh, target, prob);
  if (pos >= 0) {
    if (threadIdx.x == 0) *out = s.id_at(pos);
    return;
  }
  // u * total rounded up to the last boundary: the last positive token.
  int32_t last = -1;
  for (int32_t base = 0; base < s.n; base += kTile) {
    float v[kItems];
    int32_t ids[kItems];
    load_items(s, base, v, ids);
#pragma unroll
    for (int k = 0; k < kItems; ++k)
      if (ids[k] >= 0 && v[k] > -INFINITY && prob(v[k], ids[k]) > 0.0 && ids[k] > last)
        last = ids[k];
  }
  last = cub::BlockReduce<int32_t, kThreads>(sh.cub.max_id).Reduce(last, MaxOp());
  if (threadIdx.x == 0) *out = last >= 0 ? last : kSampleAllMasked;
}

__global__ void penalties_kernel(PenaltyParams p) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.n_edits) return;
  const PenaltyEdit e = p.edits[i];
  if (e.row < 0 || e.row >= p.rows || e.id < 0 || e.id >= p.vocab) return;
  const SamplingRow r = p.rules[e.row];
  float &logit = p.logits[static_cast<int64_t>(e.row) * p.vocab + e.id];
  float v = logit;
  if (r.repetition_penalty != 1.0f)
    v = v > 0.0f ? __fdiv_rn(v, r.repetition_penalty) : __fmul_rn(v, r.repetition_penalty);
  // The host rounds the product before the sum: no fused multiply-add here.
  logit = __fsub_rn(v, __fadd_rn(__fmul_rn(static_cast<float>(e.count), r.frequency_penalty),
                                 r.presence_penalty));
}

}  // namespace

cudaError_t apply_penalties(const PenaltyParams &p, cudaStream_t stream) {
  if (p.n_edits < 0 || p.rows < 0 || p.vocab <= 0 ||
      (p.n_edits > 0 && (!p.logits || !p.rules || !p.edits)))
    return cudaErrorInvalidValue;
  if (p.n_edits == 0) return cudaSuccess;
  constexpr int kBlock = 256;
  return launch_kernel(penalties_kernel, (p.n_edits + kBlock - 1) / kBlock, kBlock, 0, stream, p);
}

cudaError_t sample(const SampleParams &p, cudaStream_t stream) {
  if (p.rows < 0 || p.vocab <= 0 || (p.rows > 0 && (!p.logits || !p.rules || !p.out)))
    return cudaErrorInvalidValue;
  if (p.rows == 0) return cudaSuccess;
  return launch_kernel(sample_kernel, p.rows, kThreads, 0, stream, p);
}

}  // namespace vegas::kernels
