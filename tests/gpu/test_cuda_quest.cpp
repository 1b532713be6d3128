// Quest drafting on the device (kernels/quest_select.cuh, label `gpu`) against
// the host's quest rule (select/quest_pages.h: quest_page_score +
// select_quest_pages) on random paged K and queries: the page bounds must be
// the exact element-wise min/max, and each (sequence, layer) set the host's,
// except where two page scores are so close that the float sums' order
// decides (then the set must still be the top pages by a double-precision
// score, within rounding). Sizes cover GQA groups 1/4/8, head_dim 64/128,
// pages of 8/16/32, partial last pages, budgets below a page, the budget
// floor and everything; a sequence that is not quest keeps its record
// untouched. One run prints `[quest]` lines: sets compared, near ties, and
// the time of one layer's selection at the benchmark shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "quest_select.cuh"
#include "select/quest_pages.h"
#include "select/select_options.h"

namespace vegas {
namespace {

using test::Dev;

struct Shape {
  int32_t n_heads, n_kv_heads, head_dim, page_size;
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
};

constexpr int32_t kLayers = 2;
constexpr int32_t kSentinel = 0x7f7f7f7f;

// K for kLayers layers of num_pages pages: per page a random centre and a
// spread, so page bounds (and scores) differ from page to page as in a model.
std::vector<uint16_t> random_k(const Shape &s, int32_t num_pages, std::mt19937 &rng) {
  std::uniform_real_distribution<float> centre(-1.0f, 1.0f), spread(0.05f, 0.5f), unit(-1.0f, 1.0f);
  std::vector<uint16_t> k(static_cast<size_t>(kLayers) * num_pages * s.page_size * s.kv_dim());
  for (int64_t page = 0; page < int64_t{kLayers} * num_pages; ++page) {
    std::vector<float> c(static_cast<size_t>(s.kv_dim())), w(c.size());
    for (size_t e = 0; e < c.size(); ++e) {
      c[e] = centre(rng);
      w[e] = spread(rng);
    }
    for (int32_t t = 0; t < s.page_size; ++t)
      for (int32_t e = 0; e < s.kv_dim(); ++e)
        k[static_cast<size_t>((page * s.page_size + t) * s.kv_dim() + e)] =
            f32_to_bf16(c[static_cast<size_t>(e)] + w[static_cast<size_t>(e)] * unit(rng));
  }
  return k;
}

float kval(const std::vector<uint16_t> &k, const Shape &s, int32_t num_pages, int layer,
           int64_t slot, int32_t e) {
  return bf16_to_f32(
      k[static_cast<size_t>((int64_t{layer} * num_pages * s.page_size + slot) * s.kv_dim() + e)]);
}

// One sequence of a test batch.
struct Seq {
  int32_t prefix;  // -1: not a quest sequence
  int32_t budget;
  std::vector<int32_t> table;
  int32_t record_off = 0;
};

// Bounds of the first `len` slots of KV page `page`, as floats [kv_dim].
void host_bounds(const std::vector<uint16_t> &k, const Shape &s, int32_t num_pages, int layer,
                 int32_t page, int32_t len, std::vector<float> *lo, std::vector<float> *hi) {
  lo->assign(static_cast<size_t>(s.kv_dim()), INFINITY);
  hi->assign(static_cast<size_t>(s.kv_dim()), -INFINITY);
  for (int32_t t = 0; t < len; ++t)
    for (int32_t e = 0; e < s.kv_dim(); ++e) {
      const float v = kval(k, s, num_pages, layer, int64_t{page} * s.page_size + t, e);
      (*lo)[static_cast<size_t>(e)] = std::min((*lo)[static_cast<size_t>(e)], v);
      (*hi)[static_cast<size_t>(e)] = std::max((*hi)[static_cast<size_t>(e)], v);
    }
}

struct HostChoice {
  std::vector<int32_t> positions;
  std::vector<double> exact;  // page scores in double
  double magnitude = 0;       // scale of a score's terms, for the rounding tolerance
};

HostChoice host_choice(const std::vector<uint16_t> &k, const Shape &s, int32_t num_pages, int layer,
                       const Seq &seq, const float *q) {
  HostChoice out;
  const int32_t ps = s.page_size, n = seq.prefix;
  const int32_t n_pages = (n + ps - 1) / ps;
  std::vector<float> scores(static_cast<size_t>(std::max(n_pages, 1)));
  std::vector<float> lo, hi;
  const int32_t group = s.n_heads / s.n_kv_heads;
  out.exact.assign(static_cast<size_t>(n_pages), 0.0);
  for (int32_t page = 0; page < n_pages; ++page) {
    host_bounds(k, s, num_pages, layer, seq.table[static_cast<size_t>(page)],
                std::min(ps, n - page * ps), &lo, &hi);
    scores[static_cast<size_t>(page)] =
        quest_page_score(q, lo.data(), hi.data(), s.n_heads, s.n_kv_heads, s.head_dim);
    for (int32_t h = 0; h < s.n_heads; ++h)
      for (int32_t d = 0; d < s.head_dim; ++d) {
        const size_t e = static_cast<size_t>((h / group) * s.head_dim + d);
        const double qd = q[h * s.head_dim + d];
        out.exact[static_cast<size_t>(page)] += std::max(qd * lo[e], qd * hi[e]);
        out.magnitude =
            std::max(out.magnitude, std::fabs(qd) * std::max(std::fabs(lo[e]), std::fabs(hi[e])));
      }
  }
  out.magnitude *= s.n_heads * s.head_dim;
  std::vector<int32_t> scratch(scores.size());
  out.positions.resize(static_cast<size_t>(std::max(n, 1)));
  out.positions.resize(
      static_cast<size_t>(n == 0 ? 0
                                 : select_quest_pages(scores.data(), n, ps, seq.budget,
                                                      scratch.data(), out.positions.data())));
  return out;
}

// The device inputs of a batch of sequences (one query row each).
struct Batch {
  Shape s;
  int32_t num_pages = 0;
  std::vector<Seq> seqs;
  std::vector<uint16_t> k, q;
  std::vector<int32_t> tables, page_off, row_start, prefix, budget, record_off;
  int32_t record_words = 0;

  Batch(const Shape &shape, const std::vector<std::pair<int32_t, int32_t>> &prefix_budget,
        std::mt19937 &rng)
      : s(shape) {
    int32_t pages_needed = 0;
    for (const auto &pb : prefix_budget)
      pages_needed += pb.first < 0 ? 1 : pb.first / s.page_size + 1;
    num_pages = pages_needed + 5;
    k = random_k(s, num_pages, rng);
    std::vector<int32_t> pool(static_cast<size_t>(num_pages));
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    size_t next = 0;
    for (const auto &pb : prefix_budget) {
      Seq seq;
      seq.prefix = pb.first;
      seq.budget = pb.second;
      const int32_t pages = pb.first < 0 ? 1 : pb.first / s.page_size + 1;
      seq.table.assign(pool.begin() + static_cast<int64_t>(next),
                       pool.begin() + static_cast<int64_t>(next) + pages);
      next += static_cast<size_t>(pages);
      page_off.push_back(static_cast<int32_t>(tables.size()));
      tables.insert(tables.end(), seq.table.begin(), seq.table.end());
      row_start.push_back(static_cast<int32_t>(row_start.size()));
      prefix.push_back(seq.prefix);
      budget.push_back(seq.budget);
      seq.record_off = record_words + 1;  // odd offsets: records need no alignment
      record_off.push_back(seq.record_off);
      record_words +=
          3 + kLayers * (1 + kernels::quest_record_stride(std::max(seq.prefix, 0), seq.budget));
      seqs.push_back(seq);
    }
    q = test::random_bf16(seqs.size() * static_cast<size_t>(s.n_heads * s.head_dim), rng, 1.0f);
  }
};

kernels::QuestBoundsParams bounds_params(const Batch &b, const Dev<uint16_t> &k,
                                         const Dev<uint16_t> &mn, const Dev<uint16_t> &mx) {
  kernels::QuestBoundsParams p;
  p.k_cache = k.as<kernels::bf16>();
  p.k_layer_stride = int64_t{b.num_pages} * b.s.page_size * b.s.kv_dim();
  p.key_min = mn.as<kernels::bf16>();
  p.key_max = mx.as<kernels::bf16>();
  p.num_pages = b.num_pages;
  p.n_layers = kLayers;
  p.page_size = b.s.page_size;
  p.kv_dim = b.s.kv_dim();
  return p;
}

// A batch's selection inputs on the device (records poisoned with
// `records_fill`), and quest_select's parameters over them; k_cache,
// key_min, key_max and layer are left to the caller.
struct DeviceBatch {
  DeviceBatch(const Batch &b, uint8_t records_fill)
      : q(b.q),
        tables(b.tables),
        page_off(b.page_off),
        row_start(b.row_start),
        prefix(b.prefix),
        budget(b.budget),
        record_off(b.record_off),
        records(static_cast<size_t>(b.record_words) + 1, records_fill),
        keys(b.seqs.size() * static_cast<size_t>(b.num_pages)) {}

  kernels::QuestSelectParams select_params(const Batch &b) const {
    kernels::QuestSelectParams p;
    p.q = q.as<kernels::bf16>();
    p.page_table = tables.get();
    p.seq_page_off = page_off.get();
    p.seq_row_start = row_start.get();
    p.seq_prefix = prefix.get();
    p.seq_budget = budget.get();
    p.seq_record_off = record_off.get();
    p.records = records.get();
    p.keys = keys.get();
    p.key_stride = b.num_pages;
    p.n_seqs = static_cast<int32_t>(b.seqs.size());
    p.n_heads = b.s.n_heads;
    p.n_kv_heads = b.s.n_kv_heads;
    p.head_dim = b.s.head_dim;
    p.page_size = b.s.page_size;
    p.n_layers = kLayers;
    return p;
  }

  Dev<uint16_t> q;
  Dev<int32_t> tables, page_off, row_start, prefix, budget, record_off, records;
  Dev<uint32_t> keys;
};

// Proves the bounds of every page are its exact min/max, that a listed
// re-bound follows new keys and leaves unlisted pages alone, and that each
// (sequence, layer) set is the host's up to near ties.
TEST(CudaQuest, BoundsAndSelectionMatchHost) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::vector<Shape> shapes = {
      {8, 2, 64, 16}, {32, 8, 128, 16}, {4, 4, 64, 8}, {16, 2, 128, 32}};
  int32_t sets = 0, near_ties = 0;
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape &s = shapes[si];
    std::mt19937 rng(static_cast<uint32_t>(11 + si));
    const int32_t ps = s.page_size;
    const std::vector<std::pair<int32_t, int32_t>> cases = {
        {0, 0},                                      // nothing to choose
        {5, 3},                                      // one short page that does not fit
        {37 * ps, 7},                                // budget below a page: none
        {37 * ps + 9, 9 + 2 * ps},                   // the short page can fit with two
        {-1, 0},                                     // not a quest sequence
        {1007, selection_budget(1007, 0.07f, 256)},  // the floor
        {4000, selection_budget(4000, 0.07f, 256)},  // ratio
        {300, 1000},                                 // everything
        {2 * ps + 1, ps + 1},                        // tiny
    };
    Batch b(s, cases, rng);
    Dev<uint16_t> k_dev(b.k);
    const size_t bound_n = static_cast<size_t>(kLayers) * b.num_pages * s.kv_dim();
    Dev<uint16_t> mn_dev(bound_n), mx_dev(bound_n);
    ASSERT_EQ(kernels::quest_bounds(bounds_params(b, k_dev, mn_dev, mx_dev), nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    {
      const std::vector<uint16_t> mn = mn_dev.download(), mx = mx_dev.download();
      std::vector<float> lo, hi;
      for (int layer = 0; layer < kLayers; ++layer)
        for (int32_t page = 0; page < b.num_pages; ++page) {
          host_bounds(b.k, s, b.num_pages, layer, page, ps, &lo, &hi);
          for (int32_t e = 0; e < s.kv_dim(); ++e) {
            const size_t at = (static_cast<size_t>(layer) * b.num_pages + page) * s.kv_dim() + e;
            ASSERT_EQ(bf16_to_f32(mn[at]), lo[static_cast<size_t>(e)]) << si << " page " << page;
            ASSERT_EQ(bf16_to_f32(mx[at]), hi[static_cast<size_t>(e)]) << si << " page " << page;
          }
        }
    }
    // New keys in three pages; re-bound those (and skipped entries) only.
    {
      const std::vector<int32_t> listed = {b.seqs[5].table[3], -1, b.seqs[6].table[0],
                                           b.seqs[3].table[1], -1};
      const std::vector<uint16_t> before = mn_dev.download();
      std::vector<uint16_t> fresh = random_k(s, b.num_pages, rng);
      for (int32_t page : listed) {
        if (page < 0) continue;
        for (int layer = 0; layer < kLayers; ++layer) {
          const size_t from = (static_cast<size_t>(layer) * b.num_pages + page) * ps * s.kv_dim();
          std::copy(fresh.begin() + static_cast<int64_t>(from),
                    fresh.begin() + static_cast<int64_t>(from + size_t(ps) * s.kv_dim()),
                    b.k.begin() + static_cast<int64_t>(from));
        }
      }
      ASSERT_EQ(cudaMemcpy(k_dev.get(), b.k.data(), b.k.size() * 2, cudaMemcpyHostToDevice),
                cudaSuccess);
      Dev<int32_t> listed_dev(listed);
      kernels::QuestBoundsParams p = bounds_params(b, k_dev, mn_dev, mx_dev);
      p.pages = listed_dev.get();
      p.n_listed = static_cast<int32_t>(listed.size());
      ASSERT_EQ(kernels::quest_bounds(p, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<uint16_t> after = mn_dev.download();
      std::vector<float> lo, hi;
      for (int layer = 0; layer < kLayers; ++layer)
        for (int32_t page = 0; page < b.num_pages; ++page) {
          const bool is_listed = std::find(listed.begin(), listed.end(), page) != listed.end();
          host_bounds(b.k, s, b.num_pages, layer, page, ps, &lo, &hi);
          for (int32_t e = 0; e < s.kv_dim(); ++e) {
            const size_t at = (static_cast<size_t>(layer) * b.num_pages + page) * s.kv_dim() + e;
            if (is_listed) {
              ASSERT_EQ(bf16_to_f32(after[at]), lo[static_cast<size_t>(e)]) << "page " << page;
            } else {
              ASSERT_EQ(after[at], before[at]) << "unlisted page " << page << " changed";
            }
          }
        }
    }

    DeviceBatch dev(b, 0x7f);
    kernels::QuestSelectParams p = dev.select_params(b);
    const int64_t k_layer = int64_t{b.num_pages} * ps * s.kv_dim();
    const int64_t bound_layer = int64_t{b.num_pages} * s.kv_dim();
    for (int layer = 0; layer < kLayers; ++layer) {
      p.k_cache = k_dev.as<kernels::bf16>() + layer * k_layer;
      p.key_min = mn_dev.as<kernels::bf16>() + layer * bound_layer;
      p.key_max = mx_dev.as<kernels::bf16>() + layer * bound_layer;
      p.layer = layer;
      ASSERT_EQ(kernels::quest_select(p, nullptr), cudaSuccess);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int32_t> rec = dev.records.download();
    const std::vector<float> q = test::bf16_vec_to_float(b.q);
    for (size_t i = 0; i < b.seqs.size(); ++i) {
      const Seq &seq = b.seqs[i];
      const int32_t *r = rec.data() + seq.record_off;
      const std::string where = "shape " + std::to_string(si) + " seq " + std::to_string(i);
      if (seq.prefix < 0) {
        EXPECT_EQ(r[0], kSentinel) << where << ": a non-quest record was written";
        continue;
      }
      const int32_t stride = kernels::quest_record_stride(seq.prefix, seq.budget);
      ASSERT_EQ(r[0], seq.prefix) << where;
      ASSERT_EQ(r[1], stride) << where;
      for (int layer = 0; layer < kLayers; ++layer) {
        const int32_t count = r[2 + layer];
        ASSERT_GE(count, 0) << where;
        ASSERT_LE(count, std::min(seq.budget, seq.prefix)) << where;
        const int32_t *pos = r + 2 + kLayers + layer * stride;
        const std::vector<int32_t> got(pos, pos + count);
        const HostChoice want =
            host_choice(b.k, s, b.num_pages, layer, seq,
                        q.data() + i * static_cast<size_t>(s.n_heads) * s.head_dim);
        ++sets;
        if (got == want.positions) continue;
        // A near tie: whole pages, ascending, and no page left out outscoring
        // a chosen one beyond rounding.
        ++near_ties;
        std::vector<char> chosen(want.exact.size(), 0);
        for (size_t j = 0; j < got.size(); ++j) {
          ASSERT_TRUE(j == 0 || got[j] > got[j - 1]) << where;
          chosen[static_cast<size_t>(got[j] / ps)] = 1;
        }
        double worst_chosen = INFINITY, best_other = -INFINITY;
        int32_t tokens = 0;
        for (size_t pg = 0; pg < chosen.size(); ++pg) {
          if (chosen[pg]) {
            worst_chosen = std::min(worst_chosen, want.exact[pg]);
            tokens += std::min(ps, seq.prefix - static_cast<int32_t>(pg) * ps);
          } else {
            best_other = std::max(best_other, want.exact[pg]);
          }
        }
        EXPECT_EQ(tokens, count) << where << ": not whole pages";
        EXPECT_GE(worst_chosen, best_other - 1e-5 * want.magnitude)
            << where << " layer " << layer << ": differs from the host beyond a near tie";
      }
    }
  }
  std::printf("[quest] device vs host selection: %d sets, %d differ only by a near tie\n", sets,
              near_ties);
  EXPECT_LE(near_ties * 10, sets) << "too many near ties for page-varied random keys";
}

// Proves bad arguments are refused without a launch.
TEST(CudaQuest, BadArgumentsAreRefused) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  kernels::QuestSelectParams p;
  EXPECT_EQ(kernels::quest_select(p, nullptr), cudaSuccess);  // no sequence: nothing to do
  p.n_seqs = 1;
  EXPECT_EQ(kernels::quest_select(p, nullptr), cudaErrorInvalidValue);  // null pointers
  kernels::QuestBoundsParams b;
  b.num_pages = 4;
  b.n_layers = 1;
  EXPECT_EQ(kernels::quest_bounds(b, nullptr), cudaErrorInvalidValue);
  EXPECT_FALSE(kernels::quest_select_supports(64, 256));  // 16384 query values
  EXPECT_FALSE(kernels::quest_select_supports(8, 63));
  EXPECT_TRUE(kernels::quest_select_supports(32, 128));
}

// Times one layer's selection (scores + choice) and one step's re-bounding
// at the benchmark shapes: the embedded model (8 heads, 2 KV heads, 64) at
// 8K x 16 and Qwen3-8B (32, 8, 128) at 32K x 4, ratio 0.07.
TEST(CudaQuest, Timing) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  struct Bench {
    const char *name;
    Shape s;
    int32_t n, seqs;
  };
  const Bench benches[] = {{"embedded 8K x 16", {8, 2, 64, 16}, 8192, 16},
                           {"Qwen3-8B 32K x 4", {32, 8, 128, 16}, 32768, 4}};
  for (const Bench &bench : benches) {
    std::mt19937 rng(5);
    std::vector<std::pair<int32_t, int32_t>> cases(
        static_cast<size_t>(bench.seqs), {bench.n, selection_budget(bench.n, 0.07f, 256)});
    Batch b(bench.s, cases, rng);
    Dev<uint16_t> k_dev(b.k);
    const size_t bound_n = static_cast<size_t>(kLayers) * b.num_pages * bench.s.kv_dim();
    Dev<uint16_t> mn_dev(bound_n), mx_dev(bound_n);
    ASSERT_EQ(kernels::quest_bounds(bounds_params(b, k_dev, mn_dev, mx_dev), nullptr), cudaSuccess);
    DeviceBatch dev(b, 0xff);
    std::vector<int32_t> written(static_cast<size_t>(bench.seqs));
    for (size_t i = 0; i < written.size(); ++i) written[i] = b.seqs[i].table.back();
    Dev<int32_t> written_dev(written);
    kernels::QuestSelectParams p = dev.select_params(b);
    p.k_cache = k_dev.as<kernels::bf16>();
    p.key_min = mn_dev.as<kernels::bf16>();
    p.key_max = mx_dev.as<kernels::bf16>();
    kernels::QuestBoundsParams bp = bounds_params(b, k_dev, mn_dev, mx_dev);
    bp.pages = written_dev.get();
    bp.n_listed = bench.seqs;
    cudaEvent_t e0, e1, e2;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventCreate(&e2);
    std::vector<float> select_ms, bounds_ms;
    for (int it = 0; it < 23; ++it) {
      cudaEventRecord(e0);
      ASSERT_EQ(kernels::quest_select(p, nullptr), cudaSuccess);
      cudaEventRecord(e1);
      ASSERT_EQ(kernels::quest_bounds(bp, nullptr), cudaSuccess);
      cudaEventRecord(e2);
      cudaEventSynchronize(e2);
      float a = 0, c = 0;
      cudaEventElapsedTime(&a, e0, e1);
      cudaEventElapsedTime(&c, e1, e2);
      if (it >= 3) {
        select_ms.push_back(a);
        bounds_ms.push_back(c);
      }
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::sort(select_ms.begin(), select_ms.end());
    std::sort(bounds_ms.begin(), bounds_ms.end());
    const double pages = static_cast<double>(bench.seqs) * (bench.n / bench.s.page_size);
    const double bound_bytes = pages * 2 * bench.s.kv_dim() * 2;
    const double ms = select_ms[select_ms.size() / 2];
    std::printf(
        "[quest] %s: select one layer %.1f us (%.0f GB/s of page bounds), re-bound %d pages "
        "x %d layers %.1f us\n",
        bench.name, ms * 1e3, bound_bytes / (ms * 1e-3) / 1e9, bench.seqs, kLayers,
        bounds_ms[bounds_ms.size() / 2] * 1e3);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaEventDestroy(e2);
  }
}

}  // namespace
}  // namespace vegas
