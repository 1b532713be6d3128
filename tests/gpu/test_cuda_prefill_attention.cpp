// Tensor-core prefill attention (kernels/prefill_attention.cuh) against a
// float64 host reference and against the paged kernel, on random Q/K/V with
// scattered page tables: prompts from scratch, chunks over a prefix, row counts
// that are not multiples of the 128-vector tile, GQA groups 1, 4 and 8,
// head_dim 64 and 128, mixed with decode, verification, short-chunk and sparse
// sequences that the paged kernel keeps (with and without its split-K merge).
//
// Tolerance: inputs are exact bf16 values and accumulation is f32 on both
// kernels; the output is rounded to bf16 (relative step 2^-8, RMS error about
// 2^-9/sqrt(3) = 1.1e-3 per element) and the tensor-core kernel also rounds the
// softmax weights P to bf16 before P·V (another ~1.1e-3 relative, RMS), so the
// relative L2 error against float64 must stay under 5e-3, as for the paged
// kernel; an indexing or masking fault gives errors of order 1.
//
// `[prefill-attn]` lines report the measured errors and, for an 8K prompt, the
// kernel's throughput (cudaEvent, 3 warm-ups, median of 15) for Qwen3-8B's
// attention shapes and the embedded test model's, next to the paged kernel's.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>

#include "gpu_test_util.h"
#include "paged_attention.cuh"
#include "prefill_attention.cuh"

namespace vegas::test {
namespace {

struct SeqSpec {
  int start_pos;
  int n_rows;
  int sparse_prefix = -1;  // >= 0: rows attend to n_selected random positions below it, then on
  int n_selected = 0;
};

struct Shape {
  int n_heads, n_kv_heads, head_dim, page_size;
  // fp8 caches (kernels/kv_fp8.cuh), the host's K/V the values their codes
  // stand for: the kernels expand them exactly, so the bounds are the same.
  bool fp8 = false;
};

// A batch on the device with its host copy; out is poisoned (NaN) by reset().
struct Batch {
  Shape sh;
  std::vector<SeqSpec> seqs;
  std::vector<int32_t> table, page_off, row_start, n_rows, start_pos, sparse_data, sparse_off;
  std::vector<std::vector<int32_t>> selected;  // each sparse sequence's positions below its prefix
  std::vector<uint16_t> kh, vh, qh;
  int rows = 0, max_rows = 0;
  std::unique_ptr<Dev<uint16_t>> k, v, q, out;
  Fp8DeviceCache fp8;  // sh.fp8: the caches the kernels read
  std::unique_ptr<Dev<int32_t>> dt, dpo, drs, dnr, dsp, dsd, dso;
  std::unique_ptr<Dev<float>> po, pl;  // split workspace for up to kMaxSplits

  static constexpr int kMaxSplits = 4;

  size_t out_size() const { return size_t(rows) * sh.n_heads * sh.head_dim; }
  bool deferred(size_t s) const {  // what defers_to_prefill selects
    return n_rows[s] >= kernels::kPrefillMinRows && sparse_off[s] == -1;
  }

  Batch(const Shape &shape, const std::vector<SeqSpec> &specs, uint32_t seed)
      : sh(shape), seqs(specs) {
    std::mt19937 rng(seed);
    int total_pages = 3;  // pages no sequence owns
    for (const auto &s : seqs)
      total_pages += (s.start_pos + s.n_rows + sh.page_size - 1) / sh.page_size;
    std::vector<int32_t> perm(total_pages);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);  // sequences' pages interleave
    int used = 0;
    for (const auto &s : seqs) {
      page_off.push_back(static_cast<int32_t>(table.size()));
      for (int p = 0; p < (s.start_pos + s.n_rows + sh.page_size - 1) / sh.page_size; ++p)
        table.push_back(perm[used++]);
      row_start.push_back(rows);
      n_rows.push_back(s.n_rows);
      start_pos.push_back(s.start_pos);
      rows += s.n_rows;
      max_rows = std::max(max_rows, s.n_rows);
      std::vector<int32_t> sel;
      sparse_off.push_back(-1);
      if (s.sparse_prefix >= 0) {  // one-layer record {prefix, stride, count, positions}
        std::vector<int32_t> all(s.sparse_prefix);
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng);
        sel.assign(all.begin(), all.begin() + std::min(s.n_selected, s.sparse_prefix));
        std::sort(sel.begin(), sel.end());
        sparse_off.back() = static_cast<int32_t>(sparse_data.size());
        sparse_data.push_back(s.sparse_prefix);
        sparse_data.push_back(static_cast<int32_t>(sel.size()));
        sparse_data.push_back(static_cast<int32_t>(sel.size()));
        sparse_data.insert(sparse_data.end(), sel.begin(), sel.end());
      }
      selected.push_back(sel);
    }
    sparse_data.push_back(0);  // never empty
    const size_t cache_n = size_t(total_pages) * sh.page_size * sh.n_kv_heads * sh.head_dim;
    kh = random_bf16(cache_n, rng);
    vh = random_bf16(cache_n, rng);
    qh = random_bf16(out_size(), rng, 2.0f);
    if (sh.fp8) fp8.make(kh, vh, sh.head_dim);
    k = std::make_unique<Dev<uint16_t>>(kh);
    v = std::make_unique<Dev<uint16_t>>(vh);
    q = std::make_unique<Dev<uint16_t>>(qh);
    out = std::make_unique<Dev<uint16_t>>(out_size());
    dt = std::make_unique<Dev<int32_t>>(table);
    dpo = std::make_unique<Dev<int32_t>>(page_off);
    drs = std::make_unique<Dev<int32_t>>(row_start);
    dnr = std::make_unique<Dev<int32_t>>(n_rows);
    dsp = std::make_unique<Dev<int32_t>>(start_pos);
    dsd = std::make_unique<Dev<int32_t>>(sparse_data);
    dso = std::make_unique<Dev<int32_t>>(sparse_off);
    po = std::make_unique<Dev<float>>(size_t(kMaxSplits) * out_size());
    pl = std::make_unique<Dev<float>>(size_t(kMaxSplits) * rows * sh.n_heads);
  }

  void reset_out() const { cudaMemset(out->get(), 0xff, out_size() * sizeof(uint16_t)); }

  kernels::PagedAttentionParams params(int prefill_min_rows, int n_splits) const {
    kernels::PagedAttentionParams p;
    p.q = q->as<kernels::bf16>();
    p.out = out->as<kernels::bf16>();
    p.k_cache = sh.fp8 ? fp8.k->as<kernels::bf16>() : k->as<kernels::bf16>();
    p.v_cache = sh.fp8 ? fp8.v->as<kernels::bf16>() : v->as<kernels::bf16>();
    p.k_scale = sh.fp8 ? fp8.k_scale->get() : nullptr;
    p.v_scale = sh.fp8 ? fp8.v_scale->get() : nullptr;
    p.page_table = dt->get();
    p.seq_page_off = dpo->get();
    p.seq_row_start = drs->get();
    p.seq_n_rows = dnr->get();
    p.seq_start_pos = dsp->get();
    p.n_seqs = static_cast<int>(seqs.size());
    p.n_heads = sh.n_heads;
    p.n_kv_heads = sh.n_kv_heads;
    p.head_dim = sh.head_dim;
    p.page_size = sh.page_size;
    p.scale = 1.0f / std::sqrt(float(sh.head_dim));
    p.max_rows_per_seq = max_rows;
    p.n_splits = n_splits;
    p.partial_out = po->get();
    p.partial_lse = pl->get();
    p.total_rows = rows;
    p.sparse_data = dsd->get();
    p.seq_sparse_off = dso->get();
    p.n_layers = 1;
    p.layer = 0;
    p.prefill_min_rows = prefill_min_rows;
    return p;
  }

  // Float64 attention of (sequence si, row r, head h) into o[head_dim].
  void reference(size_t si, int r, int h, double *o) const {
    const int hd = sh.head_dim, kvh = h / (sh.n_heads / sh.n_kv_heads);
    const int row = row_start[si] + r, qpos = start_pos[si] + r;
    std::vector<int> keys(selected[si].begin(), selected[si].end());
    for (int pos = std::max(seqs[si].sparse_prefix, 0); pos <= qpos; ++pos) keys.push_back(pos);
    const uint16_t *qv = &qh[(size_t(row) * sh.n_heads + h) * hd];
    auto base = [&](int pos) {
      const size_t slot =
          size_t(table[page_off[si] + pos / sh.page_size]) * sh.page_size + pos % sh.page_size;
      return (slot * sh.n_kv_heads + kvh) * hd;
    };
    std::vector<double> s(keys.size());
    double m = -INFINITY, sum = 0;
    for (size_t j = 0; j < keys.size(); ++j) {
      const size_t b = base(keys[j]);
      double dot = 0;
      for (int d = 0; d < hd; ++d) dot += double(bf16_to_f32(qv[d])) * bf16_to_f32(kh[b + d]);
      s[j] = dot / std::sqrt(double(hd));
      m = std::max(m, s[j]);
    }
    for (auto &x : s) sum += (x = std::exp(x - m));
    std::fill(o, o + hd, 0.0);
    for (size_t j = 0; j < keys.size(); ++j) {
      const size_t b = base(keys[j]);
      for (int d = 0; d < hd; ++d) o[d] += s[j] / sum * bf16_to_f32(vh[b + d]);
    }
  }

  // The reference for every row (one entry per output element).
  std::vector<double> reference_all() const {
    std::vector<double> ref(out_size());
    const int hd = sh.head_dim;
    for (size_t si = 0; si < seqs.size(); ++si) {
#pragma omp parallel for schedule(dynamic)
      for (int r = 0; r < n_rows[si]; ++r)
        for (int h = 0; h < sh.n_heads; ++h)
          reference(si, r, h, &ref[(size_t(row_start[si] + r) * sh.n_heads + h) * hd]);
    }
    return ref;
  }
};

// Relative L2 error over the rows of the sequences `pick` selects.
template <typename Pick>
double rel_l2_rows(const Batch &b, const std::vector<float> &got, const std::vector<double> &ref,
                   Pick pick) {
  std::vector<float> g;
  std::vector<double> r;
  const size_t per_row = size_t(b.sh.n_heads) * b.sh.head_dim;
  for (size_t si = 0; si < b.seqs.size(); ++si) {
    if (!pick(si)) continue;
    const size_t at = b.row_start[si] * per_row, n = b.n_rows[si] * per_row;
    g.insert(g.end(), got.begin() + at, got.begin() + at + n);
    r.insert(r.end(), ref.begin() + at, ref.begin() + at + n);
  }
  return r.empty() ? 0.0 : rel_l2(g, r);
}

std::string describe(const Shape &sh) {
  return "heads " + std::to_string(sh.n_heads) + "/" + std::to_string(sh.n_kv_heads) +
         " head_dim " + std::to_string(sh.head_dim) + " page " + std::to_string(sh.page_size) +
         (sh.fp8 ? " fp8 cache" : "");
}

// The three ways to run a batch, each against the reference:
//  1. production: paged kernel (skipping long dense sequences; with splits,
//     its merge zeroes their rows) then the prefill kernel;
//  2. the prefill kernel alone on a poisoned output: the rows of the
//     sequences it takes, and no write anywhere else;
//  3. the paged kernel alone (every sequence), compared with run 1 too.
void check_batch_as(const Shape &sh, const std::vector<SeqSpec> &seqs, uint32_t seed) {
  SCOPED_TRACE(describe(sh));
  Batch b(sh, seqs, seed);
  CUDA_OK(kernels::paged_attention_init());
  CUDA_OK(kernels::prefill_attention_init());
  const auto ref = b.reference_all();
  auto is_prefill = [&](size_t si) { return b.deferred(si); };
  auto is_paged = [&](size_t si) { return !b.deferred(si); };
  bool any_paged = false;
  for (size_t si = 0; si < seqs.size(); ++si) any_paged = any_paged || !b.deferred(si);

  for (int splits : {1, Batch::kMaxSplits}) {
    b.reset_out();
    CUDA_OK(kernels::paged_attention(b.params(kernels::kPrefillMinRows, splits), nullptr));
    CUDA_OK(kernels::prefill_attention(b.params(kernels::kPrefillMinRows, splits), nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto got = bf16_vec_to_float(b.out->download());
    const double e_pre = rel_l2_rows(b, got, ref, is_prefill);
    const double e_paged = rel_l2_rows(b, got, ref, is_paged);
    std::printf(
        "[prefill-attn] %s, paged splits %d: rel L2 vs float64: tensor-core rows %.2e, "
        "paged rows %.2e\n",
        describe(sh).c_str(), splits, e_pre, e_paged);
    EXPECT_LT(e_pre, 5e-3) << "prefill rows, splits " << splits;
    if (any_paged) EXPECT_LT(e_paged, 5e-3) << "paged rows, splits " << splits;
  }

  b.reset_out();
  CUDA_OK(kernels::prefill_attention(b.params(kernels::kPrefillMinRows, 1), nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto raw = b.out->download();
  const auto alone = bf16_vec_to_float(raw);
  EXPECT_LT(rel_l2_rows(b, alone, ref, is_prefill), 5e-3) << "prefill kernel alone";
  const size_t per_row = size_t(sh.n_heads) * sh.head_dim;
  size_t stray = 0;
  for (size_t si = 0; si < seqs.size(); ++si)
    if (!b.deferred(si))
      for (size_t i = b.row_start[si] * per_row; i < (b.row_start[si] + b.n_rows[si]) * per_row;
           ++i)
        stray += raw[i] != 0xffff;
  EXPECT_EQ(stray, 0u) << "the prefill kernel wrote rows of sequences it does not take";

  b.reset_out();
  CUDA_OK(kernels::paged_attention(b.params(0, 1), nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto paged = bf16_vec_to_float(b.out->download());
  std::vector<double> alone_d(alone.begin(), alone.end());
  const double e_vs_paged = rel_l2_rows(b, paged, alone_d, is_prefill);
  std::printf("[prefill-attn] %s: paged kernel alone %.2e vs float64; tensor-core vs paged %.2e\n",
              describe(sh).c_str(), rel_l2(paged, ref), e_vs_paged);
  EXPECT_LT(rel_l2(paged, ref), 5e-3);
  EXPECT_LT(e_vs_paged, 7e-3);
}

// Every batch with bf16 caches and with fp8 caches.
void check_batch(const Shape &sh, const std::vector<SeqSpec> &seqs, uint32_t seed) {
  check_batch_as(sh, seqs, seed);
  Shape fp8 = sh;
  fp8.fp8 = true;
  check_batch_as(fp8, seqs, seed);
}

class PrefillAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

// Long sequences (tensor-core kernel): exactly the threshold, a prompt from
// scratch that is no multiple of the tile, chunks over odd and long prefixes;
// short ones (paged kernel): just below the threshold, decode, verification,
// and a long sparse-drafting sequence.
const std::vector<SeqSpec> kMixed = {{0, 64},  {0, 200}, {777, 130}, {3000, 257},
                                     {40, 63}, {500, 1}, {300, 5},   {1000, 70, 900, 50}};

TEST_F(PrefillAttention, MatchesReferenceHeadDim64) {
  for (int group : {1, 4, 8}) check_batch({2 * group, 2, 64, 16}, kMixed, 100 + group);
}

TEST_F(PrefillAttention, MatchesReferenceHeadDim128) {
  for (int group : {1, 4, 8}) check_batch({2 * group, 2, 128, 16}, kMixed, 200 + group);
}

// Qwen3-8B's heads (32/8), page sizes other than 16, a batch of only long rows,
// and one sequence whose row count leaves a single vector in its last tile.
TEST_F(PrefillAttention, OtherPagesAndShapes) {
  check_batch({32, 8, 128, 8}, {{0, 100}, {129, 96}}, 301);
  check_batch({8, 2, 64, 32}, {{5, 65}, {64, 64}, {0, 1}}, 302);
  check_batch({3, 1, 64, 16}, {{10, 129}}, 303);   // group 3: rows straddle tiles
  check_batch({3, 1, 128, 16}, {{10, 129}}, 304);  // ... and the two M tiles of a warp
}

// One prompt chunk of n_rows at start_pos: throughput of both kernels, the
// tensor-core output against the paged kernel's (all rows) and against the
// float64 reference (sampled rows, every head).
void time_chunk(const char *label, const Shape &sh, int start_pos, int n_rows) {
  Batch b(sh, {{start_pos, n_rows}}, 7);
  CUDA_OK(kernels::paged_attention_init());
  CUDA_OK(kernels::prefill_attention_init());
  const auto pre = b.params(kernels::kPrefillMinRows, 1), paged = b.params(0, 1);
  b.reset_out();
  const double t_pre =
      test::median_launch_ms([&] { return kernels::prefill_attention(pre, nullptr); });
  CUDA_OK(cudaGetLastError());
  const auto got = bf16_vec_to_float(b.out->download());
  const double t_paged =
      test::median_launch_ms([&] { return kernels::paged_attention(paged, nullptr); });
  CUDA_OK(cudaGetLastError());
  const auto ref_gpu = bf16_vec_to_float(b.out->download());
  // Causal work: every row r attends start_pos + r + 1 keys; 4 flops per (query, key, dim).
  const double keys = double(n_rows) * start_pos + double(n_rows) * (n_rows + 1) / 2;
  const double flops = 4.0 * keys * sh.head_dim * sh.n_heads;
  std::printf(
      "[prefill-attn] %s: %s, %d rows over a %d-token prefix: tensor-core %.3f ms = %.1f "
      "TFLOP/s; paged (SIMT) %.3f ms = %.1f TFLOP/s; speedup %.1fx\n",
      label, describe(sh).c_str(), n_rows, start_pos, t_pre, flops / t_pre * 1e-9, t_paged,
      flops / t_paged * 1e-9, t_paged / t_pre);
  std::vector<double> paged_d(ref_gpu.begin(), ref_gpu.end());
  const double e_vs_paged = rel_l2(got, paged_d);
  // Sampled rows against float64: the first and last rows, tile edges, a few in between.
  std::vector<float> g;
  std::vector<double> r;
  const size_t per_row = size_t(sh.n_heads) * sh.head_dim;
  std::vector<double> o(sh.head_dim);
  for (int row : {0, 1, 63, 64, 127, 128, n_rows / 3, n_rows / 2 + 1, n_rows - 2, n_rows - 1}) {
    if (row < 0 || row >= n_rows) continue;
    for (int h = 0; h < sh.n_heads; ++h) {
      b.reference(0, row, h, o.data());
      r.insert(r.end(), o.begin(), o.end());
      const size_t at = size_t(row) * per_row + size_t(h) * sh.head_dim;
      g.insert(g.end(), got.begin() + at, got.begin() + at + sh.head_dim);
    }
  }
  const double e_ref = rel_l2(g, r);
  std::printf(
      "[prefill-attn] %s: rel L2 tensor-core vs paged (all rows) %.2e, vs float64 "
      "(10 sampled rows) %.2e\n",
      label, e_vs_paged, e_ref);
  EXPECT_LT(e_vs_paged, 7e-3);
  EXPECT_LT(e_ref, 5e-3);
  // A loose floor that holds on any tensor-core GPU; the printed numbers are the measurement.
  EXPECT_GT(t_paged / t_pre, 2.0) << "the tensor-core kernel should beat the SIMT kernel";
}

// A mixed step as CudaContext runs it: a 2K prompt chunk over a 6K prefix
// and 32 decode rows at 8K context, all on the paged kernel versus the paged
// kernel (decode rows) followed by the tensor-core kernel (the chunk).
void time_mixed_step() {
  const Shape sh{32, 8, 128, 16};
  std::vector<SeqSpec> seqs = {{6144, 2048}};
  for (int i = 0; i < 32; ++i) seqs.push_back({8000 + i, 1});
  Batch b(sh, seqs, 9);
  CUDA_OK(kernels::paged_attention_init());
  CUDA_OK(kernels::prefill_attention_init());
  const auto all_paged = b.params(0, 1), split = b.params(kernels::kPrefillMinRows, 1);
  const double t_paged =
      test::median_launch_ms([&] { return kernels::paged_attention(all_paged, nullptr); });
  const auto want = b.out->download();
  b.reset_out();
  const double t_both = test::median_launch_ms([&] {
    const cudaError_t e = kernels::paged_attention(split, nullptr);
    return e != cudaSuccess ? e : kernels::prefill_attention(split, nullptr);
  });
  CUDA_OK(cudaGetLastError());
  const auto got = bf16_vec_to_float(b.out->download());
  const auto want_f = bf16_vec_to_float(want);
  const double e = rel_l2(got, std::vector<double>(want_f.begin(), want_f.end()));
  std::printf(
      "[prefill-attn] mixed step (%s, 2048-row chunk over 6144 + 32 decode rows at ~8K): all "
      "paged %.3f ms, paged + tensor-core %.3f ms (%.1fx); rel L2 between them %.2e\n",
      describe(sh).c_str(), t_paged, t_both, t_paged / t_both, e);
  EXPECT_LT(e, 7e-3);
}

TEST_F(PrefillAttention, Throughput8K) {
  time_mixed_step();
  time_chunk("Qwen3-8B 8K prompt", {32, 8, 128, 16}, 0, 8192);
  time_chunk("Qwen3-8B last 2K chunk of 8K", {32, 8, 128, 16}, 6144, 2048);
  time_chunk("embedded model 8K prompt", {8, 2, 64, 16}, 0, 8192);
}

}  // namespace
}  // namespace vegas::test
