// Device KV selection (kernels/kv_select.cuh) against the host policies'
// building blocks (reduce_scores + select_window_top_k, the streaming rule) on
// random captured scores (label `gpu`).
//
// With logit scores the device sums in the host's order, so the sets must be
// identical, ties included (integer-valued logits make many ties; the ranking
// prefers later positions). With weight scores the device uses a fast exp, so a
// set may differ only by candidates whose score is within 1e-5 (relative) of
// the budget's boundary score.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "kv_select.cuh"
#include "select/score_reduce.h"
#include "select/top_k_select.h"

namespace vegas {
namespace {

using test::Dev;

struct Case {
  int32_t n;
  int32_t head, tail, scored;
  int32_t n_rows;
  bool weight;
  bool integer_logits;  // many ties
};

struct Captures {
  int32_t layers, slots, heads, stride;
  std::vector<float> logits, lse;
};

Captures random_captures(int32_t layers, int32_t slots, int32_t heads, int32_t stride,
                         bool integer_logits, std::mt19937 &rng) {
  Captures c{layers, slots, heads, stride, {}, {}};
  c.logits.resize(static_cast<size_t>(layers) * slots * heads * stride);
  c.lse.resize(static_cast<size_t>(layers) * slots * heads);
  std::normal_distribution<float> g(0.0f, 2.0f);
  std::uniform_int_distribution<int> small(-2, 2);
  // Scores as the attention kernels store them: fp16 values.
  for (float &v : c.logits)
    v = test::f16_value(test::f16_bits(integer_logits ? static_cast<float>(small(rng)) : g(rng)));
  // A plausible lse: log-sum-exp of the line (its exact value does not matter).
  for (size_t line = 0; line < c.lse.size(); ++line) {
    double s = 0;
    for (int32_t p = 0; p < stride; ++p) s += std::exp(c.logits[line * stride + p]);
    c.lse[line] = static_cast<float>(std::log(s));
  }
  return c;
}

// The host's set for one (layer, sequence), as the policies build it.
std::vector<int32_t> host_set(const Captures &c, const Case &k, int32_t layer, int32_t first_slot,
                              std::vector<float> *scores_out) {
  std::vector<int32_t> out;
  for (int32_t p = 0; p < k.head; ++p) out.push_back(p);
  const int32_t m = k.n - k.head - k.tail;
  std::vector<float> scores(static_cast<size_t>(k.n), 0.0f);
  if (k.scored > 0) {
    ScoreView view;
    const size_t layer_lines = static_cast<size_t>(layer) * c.slots * c.heads;
    view.logits = c.logits.data() + (layer_lines + static_cast<size_t>(first_slot) * c.heads) *
                                        static_cast<size_t>(c.stride);
    view.lse = c.lse.data() + layer_lines + static_cast<size_t>(first_slot) * c.heads;
    view.n_rows = k.n_rows;
    view.stride = c.stride;
    std::vector<int32_t> rows(static_cast<size_t>(k.n_rows));
    for (int32_t r = 0; r < k.n_rows; ++r) rows[static_cast<size_t>(r)] = r;
    reduce_scores(view, c.heads, rows.data(), k.n_rows, k.n,
                  k.weight ? ScoreKind::kWeight : ScoreKind::kLogit, scores.data());
    // The middle [head, n - tail) ranked on its own: shift so top-k sees [0, m).
    std::vector<int32_t> scratch(static_cast<size_t>(m)), chosen(static_cast<size_t>(m));
    const int32_t got =
        select_top_k(scores.data() + k.head, m, k.scored, scratch.data(), chosen.data());
    for (int32_t i = 0; i < got; ++i) out.push_back(k.head + chosen[static_cast<size_t>(i)]);
  }
  for (int32_t p = k.n - k.tail; p < k.n; ++p) out.push_back(p);
  std::sort(out.begin(), out.end());
  if (scores_out) *scores_out = scores;
  return out;
}

TEST(CudaKvSelect, MatchesHostSelection) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  ASSERT_EQ(kernels::kv_select_init(), cudaSuccess);
  std::mt19937 rng(7);
  const std::vector<Case> cases = {
      {1000, 0, 0, 70, 2, false, false},    // pure top-k, logits
      {1000, 0, 35, 35, 2, false, false},   // hybrid
      {4096, 0, 143, 144, 2, true, false},  // hybrid, weights
      {8193, 0, 0, 574, 2, true, false},    // pure, weights
      {3000, 0, 100, 110, 7, false, true},  // all rows, many ties
      {3000, 0, 0, 333, 1, false, true},    // one row, ties
      {500, 16, 240, 0, 0, false, false},   // streaming: sinks + window
      {300, 0, 10, 290, 2, true, false},    // everything kept
      {257, 257, 0, 0, 0, true, false},     // full: head = n
      {64, 0, 3, 1, 2, false, true},        // tiny
      // Long contexts: 16 and 20 scoring chunks, 32 and 40 ballot rounds a
      // warp in the compaction.
      {16384, 16, 512, 600, 2, true, false},  // hybrid with sinks, weights
      {20000, 0, 64, 1400, 3, false, true},   // three rows, ties
      {6000, 4, 200, 220, 2, false, true},    // sinks, ties
      {40000, 0, 100, 2700, 2, true, false},  // past 32K: 79 candidates a thread
      // Middles past the 48K keys the selection stages in shared memory: read from global.
      {50000, 0, 100, 3500, 2, true, false},
      {49252, 0, 100, 3400, 2, false, true},  // middle of exactly 48K keys: staged
  };
  const int32_t layers = 3, heads = 4;
  int32_t mismatched_sets = 0;
  // Each case twice: a capture stride the kernel reads a float at a time
  // (n + 5, odd for these n), and one it reads as float4 (a multiple of 4, as
  // CudaContext pads it).
  for (size_t run = 0; run < 2 * cases.size(); ++run) {
    const size_t ci = run / 2;
    const Case &k = cases[ci];
    // Two sequences, captured rows of the second after the first's; the
    // float4 runs of cases up to 8K candidates take 64, whose 192 blocks run
    // the selection kernel's 512-thread form (past one block a multiprocessor).
    const int32_t seqs = run % 2 && k.n <= 8193 ? 64 : 2;
    const int32_t rows = std::max(k.n_rows, 1);
    const int32_t slots = seqs * rows, stride = run % 2 ? (k.n + 8) / 4 * 4 : k.n + 5;
    const Captures c = random_captures(layers, slots, heads, stride, k.integer_logits, rng);
    std::vector<kernels::KvSelectDesc> descs(static_cast<size_t>(seqs));
    const int32_t rec_stride = k.n + 3;
    const int32_t words = 2 + layers * (1 + rec_stride);
    for (int32_t s = 0; s < seqs; ++s) {
      kernels::KvSelectDesc &d = descs[static_cast<size_t>(s)];
      d.n = k.n;
      d.head = k.head;
      d.tail = k.tail;
      d.scored = k.scored;
      d.first_slot = s * rows;
      d.n_rows = k.n_rows;
      d.record_off = s * words + 1;  // odd offset: records need no alignment
      d.stride = rec_stride;
      d.weight = k.weight ? 1 : 0;
    }
    Dev<kernels::KvSelectDesc> desc_dev(descs);
    Dev<uint16_t> logits_dev(test::f16_vec_bits(c.logits));
    Dev<float> lse_dev(c.lse);
    Dev<uint32_t> keys(static_cast<size_t>(seqs) * layers * k.n);
    Dev<int32_t> records(static_cast<size_t>(seqs) * words + 1);
    kernels::KvSelectParams p;
    p.desc = desc_dev.get();
    p.n_seqs = seqs;
    p.n_layers = layers;
    p.n_heads = heads;
    p.cap_logits = logits_dev.as<kernels::f16>();
    p.cap_lse = lse_dev.get();
    p.cap_slots = slots;
    p.cap_stride = stride;
    p.keys = keys.get();
    p.key_stride = k.n;
    p.records = records.get();
    ASSERT_EQ(kernels::kv_select(p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int32_t> rec = records.download();
    for (int32_t s = 0; s < seqs; ++s) {
      const int32_t *r = rec.data() + s * words + 1;
      EXPECT_EQ(r[0], k.n) << "case " << ci;
      EXPECT_EQ(r[1], rec_stride) << "case " << ci;
      for (int32_t l = 0; l < layers; ++l) {
        std::vector<float> scores;
        const std::vector<int32_t> want = host_set(c, k, l, s * rows, &scores);
        ASSERT_EQ(r[2 + l], static_cast<int32_t>(want.size())) << "case " << ci;
        const int32_t *pos = r + 2 + layers + l * rec_stride;
        std::vector<int32_t> got(pos, pos + r[2 + l]);
        ASSERT_TRUE(std::is_sorted(got.begin(), got.end())) << "case " << ci;
        ASSERT_TRUE(std::adjacent_find(got.begin(), got.end()) == got.end()) << "case " << ci;
        if (got == want) continue;
        ASSERT_TRUE(k.weight) << "case " << ci << " layer " << l
                              << ": logit scores must give the host's exact set";
        // Weights: only near-boundary swaps are allowed.
        ++mismatched_sets;
        float boundary = INFINITY;
        for (int32_t q : want)
          if (q >= k.head && q < k.n - k.tail) boundary = std::min(boundary, scores[q]);
        std::vector<int32_t> diff;
        std::set_symmetric_difference(got.begin(), got.end(), want.begin(), want.end(),
                                      std::back_inserter(diff));
        for (int32_t q : diff)
          EXPECT_NEAR(scores[static_cast<size_t>(q)], boundary, 1e-5 * std::fabs(boundary) + 1e-12)
              << "case " << ci << " layer " << l << " position " << q;
      }
    }
  }
  std::cout << "[kv-select] sets differing from the host only at the boundary (weights): "
            << mismatched_sets << "\n";
}

// Timing of one selection at the benchmark's shape (8 layers, 8 heads, two
// rows, 16 sequences, n = 8K, ratio 0.07, half window).
TEST(CudaKvSelect, TimingAtBenchShape) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  ASSERT_EQ(kernels::kv_select_init(), cudaSuccess);
  std::mt19937 rng(3);
  const int32_t layers = 8, heads = 8, seqs = 16, n = 8192, rows = 2;
  const int32_t slots = seqs * rows;
  std::vector<float> logits(static_cast<size_t>(layers) * slots * heads * n);
  std::normal_distribution<float> g(0.0f, 2.0f);
  for (float &v : logits) v = g(rng);
  std::vector<float> lse(static_cast<size_t>(layers) * slots * heads, 8.0f);
  const int32_t k = static_cast<int32_t>(std::ceil(0.07 * n));
  const int32_t words = 2 + layers * (1 + n);
  std::vector<kernels::KvSelectDesc> descs(seqs);
  for (int32_t s = 0; s < seqs; ++s) {
    kernels::KvSelectDesc &d = descs[static_cast<size_t>(s)];
    d.n = n;
    d.tail = k / 2;
    d.scored = k - k / 2;
    d.first_slot = s * rows;
    d.n_rows = rows;
    d.record_off = s * words;
    d.stride = n;
  }
  Dev<kernels::KvSelectDesc> desc_dev(descs);
  Dev<uint16_t> logits_dev(test::f16_vec_bits(logits));
  Dev<float> lse_dev(lse);
  Dev<uint32_t> keys(static_cast<size_t>(seqs) * layers * n);
  Dev<int32_t> records(static_cast<size_t>(seqs) * words);
  kernels::KvSelectParams p;
  p.desc = desc_dev.get();
  p.n_seqs = seqs;
  p.n_layers = layers;
  p.n_heads = heads;
  p.cap_logits = logits_dev.as<kernels::f16>();
  p.cap_lse = lse_dev.get();
  p.cap_slots = slots;
  p.cap_stride = n;
  p.keys = keys.get();
  p.key_stride = n;
  p.records = records.get();
  const double us = test::median_launch_us([&] { return kernels::kv_select(p, nullptr); });
  ASSERT_GE(us, 0.0) << "kv_select failed";
  const double bytes = static_cast<double>(logits.size()) * 2;  // fp16 on the device
  std::cout << "[kv-select] 16 seqs x 8 layers, n 8192, 2 rows x 8 heads: median " << us << " us ("
            << bytes / (us * 1e-6) / 1e9 << " GB/s of captured scores read)\n";
}

}  // namespace
}  // namespace vegas
