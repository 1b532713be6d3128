// Paged attention kernel vs a float64 host reference: decoding, multi-row
// causal verification rows, chunked prefill over a prefix, mixed batches,
// split-K with the LSE merge, and a 16K context. Tolerance: the output is
// rounded to bf16 (relative step 2^-8, error <= 2^-9 per element), the inputs
// are exact bf16 values used identically by both sides and accumulation is
// f32, so the relative L2 error must stay under 5e-3.
#include <algorithm>
#include <numeric>

#include "gpu_test_util.h"
#include "paged_attention.cuh"

namespace vegas::test {
namespace {

struct SeqSpec {
  int start_pos;
  int n_rows;
};

struct Case {
  int n_heads, n_kv_heads, head_dim, page_size;
  std::vector<SeqSpec> seqs;
  int n_splits;
};

void run_case(const Case &c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
  // Page tables: a shuffled pool so sequences' pages interleave.
  int total_pages = 0;
  for (const auto &s : c.seqs)
    total_pages += (s.start_pos + s.n_rows + c.page_size - 1) / c.page_size;
  total_pages += 3;  // pages no sequence owns
  std::vector<int32_t> perm(total_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> table, page_off, row_start, n_rows, start_pos;
  int rows = 0, used = 0, max_rows = 0;
  for (const auto &s : c.seqs) {
    const int pages = (s.start_pos + s.n_rows + c.page_size - 1) / c.page_size;
    page_off.push_back(static_cast<int32_t>(table.size()));
    for (int p = 0; p < pages; ++p) table.push_back(perm[used++]);
    row_start.push_back(rows);
    n_rows.push_back(s.n_rows);
    start_pos.push_back(s.start_pos);
    rows += s.n_rows;
    max_rows = std::max(max_rows, s.n_rows);
  }
  const size_t cache_n = size_t(total_pages) * c.page_size * c.n_kv_heads * hd;
  const auto kh = random_bf16(cache_n, rng), vh = random_bf16(cache_n, rng);
  const auto qh = random_bf16(size_t(rows) * c.n_heads * hd, rng, 2.0f);
  Dev<uint16_t> k(kh), v(vh), q(qh), out(size_t(rows) * c.n_heads * hd);
  Dev<int32_t> dt(table), dpo(page_off), drs(row_start), dnr(n_rows), dsp(start_pos);
  Dev<float> po(size_t(c.n_splits) * rows * c.n_heads * hd),
      pl(size_t(c.n_splits) * rows * c.n_heads);

  kernels::PagedAttentionParams p;
  p.q = q.as<kernels::bf16>();
  p.out = out.as<kernels::bf16>();
  p.k_cache = k.as<kernels::bf16>();
  p.v_cache = v.as<kernels::bf16>();
  p.page_table = dt.get();
  p.seq_page_off = dpo.get();
  p.seq_row_start = drs.get();
  p.seq_n_rows = dnr.get();
  p.seq_start_pos = dsp.get();
  p.n_seqs = static_cast<int>(c.seqs.size());
  p.n_heads = c.n_heads;
  p.n_kv_heads = c.n_kv_heads;
  p.head_dim = hd;
  p.page_size = c.page_size;
  p.scale = 1.0f / std::sqrt(float(hd));
  p.max_rows_per_seq = max_rows;
  p.n_splits = c.n_splits;
  p.partial_out = po.get();
  p.partial_lse = pl.get();
  p.total_rows = rows;
  CUDA_OK(kernels::paged_attention_init());
  CUDA_OK(kernels::paged_attention(p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());

  const auto kd = to_double(kh), vd = to_double(vh), qd = to_double(qh);
  std::vector<double> ref(size_t(rows) * c.n_heads * hd);
  for (size_t si = 0; si < c.seqs.size(); ++si) {
    for (int r = 0; r < n_rows[si]; ++r) {
      const int row = row_start[si] + r, qpos = start_pos[si] + r;
      for (int h = 0; h < c.n_heads; ++h) {
        const int kvh = h / group;
        const double *qv = &qd[(size_t(row) * c.n_heads + h) * hd];
        std::vector<double> s(qpos + 1);
        double m = -INFINITY;
        auto base = [&](int pos) {
          const int slot =
              table[page_off[si] + pos / c.page_size] * c.page_size + pos % c.page_size;
          return (size_t(slot) * c.n_kv_heads + kvh) * hd;
        };
        for (int pos = 0; pos <= qpos; ++pos) {
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += qv[d] * kd[base(pos) + d];
          s[pos] = dot / std::sqrt(double(hd));
          m = std::max(m, s[pos]);
        }
        double sum = 0;
        for (auto &x : s) sum += (x = std::exp(x - m));
        double *o = &ref[(size_t(row) * c.n_heads + h) * hd];
        for (int pos = 0; pos <= qpos; ++pos)
          for (int d = 0; d < hd; ++d) o[d] += s[pos] / sum * vd[base(pos) + d];
      }
    }
  }
  const auto got = bf16_vec_to_float(out.download());
  EXPECT_LT(rel_l2(got, ref), 5e-3) << "splits " << c.n_splits << " head_dim " << hd;
}

class Attention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

// Decoding: one row per sequence, different lengths (inside one page, across
// pages), GQA 4, head_dim 64 and 128, with and without splits.
TEST_F(Attention, DecodeRows) {
  for (int hd : {64, 128})
    for (int splits : {1, 3, 8})
      run_case({8, 2, hd, 16, {{0, 1}, {5, 1}, {300, 1}, {1023, 1}}, splits}, 1 + hd + splits);
}

// Verification: 1+γ rows per sequence, causal among themselves.
TEST_F(Attention, VerifyRowsAreCausal) {
  for (int splits : {1, 4})
    run_case({8, 2, 64, 16, {{40, 5}, {700, 8}, {3, 2}}, splits}, 7 + splits);
  run_case({32, 8, 128, 16, {{900, 4}, {31, 4}}, 2}, 99);
}

// Chunked prefill over an existing prefix (large row tiles), mixed with decoding rows.
TEST_F(Attention, PrefillChunkOverPrefixMixedWithDecode) {
  for (int splits : {1, 2})
    run_case({8, 2, 64, 16, {{100, 150}, {0, 70}, {513, 1}}, splits}, 11 + splits);
  run_case({32, 8, 128, 16, {{0, 33}, {64, 20}, {7, 1}}, 1}, 12);
  // MHA (group 1) and a page size other than 16.
  run_case({4, 4, 64, 8, {{17, 40}, {250, 1}}, 3}, 13);
}

// Long context: 16K tokens, decode and verify rows, split-K with the merge.
TEST_F(Attention, LongContext16K) {
  run_case({32, 8, 128, 16, {{16383, 1}, {16000, 4}}, 16}, 21);
  run_case({8, 2, 64, 16, {{16383, 1}}, 64}, 22);
}

}  // namespace
}  // namespace vegas::test
