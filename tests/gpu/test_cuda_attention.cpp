// Paged attention kernel vs a float64 host reference: decoding, multi-row
// causal verification rows, chunked prefill over a prefix, mixed batches,
// split-K with the LSE merge, a 16K context, and every instantiated head_dim (one-row batches take
// decode_attention.cu, the others the tiled kernel). Tolerance: the output
// is rounded to bf16 (relative step 2^-8, error <= 2^-9 per element), the inputs are exact bf16
// values used identically by both sides and accumulation is f32, so the relative L2 error must stay
// under 5e-3. Sparse drafting rows (random selected sets below a prefix, several layers' records)
// and score capture (logits and log-sum-exp of full rows, f32 outputs) are checked the same way;
// captured values are f32 dot products of exact inputs, so they must match the float64 reference to
// 1e-4 relative (plus 1e-4 absolute). Every case runs twice: with bf16 caches and with fp8 caches
// (e4m3 codes and per-head scales), the reference then computed from the values the codes stand
// for, which every kernel must expand exactly.
#include <algorithm>
#include <numeric>

#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "gpu_test_util.h"
#include "paged_attention.cuh"

namespace vegas::test {
namespace {

struct SeqSpec {
  int start_pos;
  int n_rows;
  int sparse_prefix = -1;  // >= 0: sparse row set over [0, prefix), see n_selected
  int n_selected = 0;
  int n_candidates = -1;  // >= 0: every row captured with this many candidates
};

struct Case {
  int n_heads, n_kv_heads, head_dim, page_size;
  std::vector<SeqSpec> seqs;
  int n_splits;
  // split_counters given: one-row batches merge their own splits; and, as in
  // the backend's decode steps, read their indices and keys ahead (read_ahead).
  bool in_kernel_merge = false;
  bool sparse_step = false;  // PagedAttentionParams::sparse_step: every row drafts sparse
  int decode_wide = 0;       // PagedAttentionParams::decode_wide
};

constexpr int kLayers = 3;  // sparse records hold this many layers
constexpr int kLayer = 1;   // the layer the kernel attends in

// A sparse record {prefix, stride, counts[kLayers], positions[kLayers][stride]}
// with a different random selection per layer; returns layer kLayer's set.
std::vector<int32_t> add_sparse_record(const SeqSpec &s, std::mt19937 &rng,
                                       std::vector<int32_t> &data) {
  const int stride = s.n_selected + 3;
  std::vector<int32_t> all(s.sparse_prefix), mine;
  std::iota(all.begin(), all.end(), 0);
  data.push_back(s.sparse_prefix);
  data.push_back(stride);
  const size_t counts_at = data.size();
  data.resize(data.size() + kLayers + size_t(kLayers) * stride, -7);
  for (int l = 0; l < kLayers; ++l) {
    std::shuffle(all.begin(), all.end(), rng);
    const int n = std::min<int>(s.n_selected + l % 2, s.sparse_prefix);  // counts differ by layer
    std::vector<int32_t> sel(all.begin(), all.begin() + n);
    std::sort(sel.begin(), sel.end());
    data[counts_at + l] = n;
    std::copy(sel.begin(), sel.end(), data.begin() + counts_at + kLayers + size_t(l) * stride);
    if (l == kLayer) mine = sel;
  }
  return mine;
}

// fp8: the caches in fp8 (kernels/kv_fp8.cuh), the reference on the values
// they stand for; the kernels expand them to exactly those bf16 values, so
// the bound is the same.
void run_case_as(const Case &c, uint32_t seed, bool fp8) {
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
  std::vector<int32_t> sparse_data, sparse_off, row_slot, cap_cand;
  std::vector<std::vector<int32_t>> selected;
  int rows = 0, used = 0, max_rows = 0, slots = 0, cap_stride = 1;
  for (const auto &s : c.seqs) {
    sparse_off.push_back(s.sparse_prefix >= 0 ? static_cast<int32_t>(sparse_data.size()) : -1);
    selected.push_back(s.sparse_prefix >= 0 ? add_sparse_record(s, rng, sparse_data)
                                            : std::vector<int32_t>{});
    cap_cand.push_back(std::max(s.n_candidates, 0));
    cap_stride = std::max(cap_stride, s.n_candidates);
    for (int r = 0; r < s.n_rows; ++r) row_slot.push_back(s.n_candidates >= 0 ? slots++ : -1);
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
  auto kh = random_bf16(cache_n, rng);
  auto vh = random_bf16(cache_n, rng);
  // Each row's own key (written by the step itself: after the PDL wait under
  // read_ahead) gets V 16x larger, so a kernel that drops it or reads it from
  // the wrong place fails the bound however many keys dilute its weight.
  for (size_t si = 0; si < c.seqs.size(); ++si)
    for (int r = 0; r < c.seqs[si].n_rows; ++r) {
      const int pos = c.seqs[si].start_pos + r;
      const size_t slot =
          size_t(table[page_off[si] + pos / c.page_size]) * c.page_size + pos % c.page_size;
      for (size_t d = slot * c.n_kv_heads * hd; d < (slot + 1) * c.n_kv_heads * hd; ++d)
        vh[d] = f32_to_bf16(16.0f * bf16_to_f32(vh[d]));
    }
  const auto qh = random_bf16(size_t(rows) * c.n_heads * hd, rng, 2.0f);
  Fp8DeviceCache f8;
  if (fp8) f8.make(kh, vh, hd);
  Dev<uint16_t> k(kh), v(vh), q(qh), out(size_t(rows) * c.n_heads * hd);
  Dev<int32_t> dt(table), dpo(page_off), drs(row_start), dnr(n_rows), dsp(start_pos);
  Dev<float> po(size_t(c.n_splits) * rows * c.n_heads * hd),
      pl(size_t(c.n_splits) * rows * c.n_heads);
  sparse_data.push_back(0);  // never empty
  Dev<int32_t> dsd(sparse_data), dso(sparse_off), drc(row_slot), dcc(cap_cand);
  const float poison = std::nanf("");
  Dev<uint16_t> cap_l(size_t(std::max(slots, 1)) * c.n_heads * cap_stride);  // fp16 NaN poison
  Dev<float> cap_e(std::vector<float>(size_t(std::max(slots, 1)) * c.n_heads, poison));

  kernels::PagedAttentionParams p;
  p.q = q.as<kernels::bf16>();
  p.out = out.as<kernels::bf16>();
  p.k_cache = fp8 ? f8.k->as<kernels::bf16>() : k.as<kernels::bf16>();
  p.v_cache = fp8 ? f8.v->as<kernels::bf16>() : v.as<kernels::bf16>();
  p.k_scale = fp8 ? f8.k_scale->get() : nullptr;
  p.v_scale = fp8 ? f8.v_scale->get() : nullptr;
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
  p.sparse_data = dsd.get();
  p.seq_sparse_off = dso.get();
  p.n_layers = kLayers;
  p.layer = kLayer;
  if (slots > 0) {
    p.cap_logits = cap_l.as<kernels::f16>();
    p.cap_lse = cap_e.get();
    p.row_cap_slot = drc.get();
    p.seq_cap_cand = dcc.get();
    p.cap_stride = cap_stride;
  }
  Dev<int32_t> counters(std::vector<int32_t>(c.seqs.size() * c.n_kv_heads, 0));
  if (c.in_kernel_merge) p.split_counters = counters.get();
  p.read_ahead = c.in_kernel_merge ? 1 : 0;
  p.sparse_step = c.sparse_step ? 1 : 0;
  p.decode_wide = c.decode_wide;
  CUDA_OK(kernels::paged_attention_init());
  CUDA_OK(kernels::paged_attention(p, nullptr));
  if (c.in_kernel_merge) CUDA_OK(kernels::paged_attention(p, nullptr));  // counters were reset
  CUDA_OK(cudaDeviceSynchronize());
  for (int32_t n : counters.download()) EXPECT_EQ(n, 0) << "split counter left set";

  const auto kd = to_double(kh), vd = to_double(vh), qd = to_double(qh);
  std::vector<double> ref(size_t(rows) * c.n_heads * hd);
  const auto got_l = f16_vec_to_float(cap_l.download());
  const auto got_e = cap_e.download();
  int cap_bad = 0;
  for (size_t si = 0; si < c.seqs.size(); ++si) {
    for (int r = 0; r < n_rows[si]; ++r) {
      const int row = row_start[si] + r, qpos = start_pos[si] + r;
      // The positions this row attends to.
      std::vector<int> keys = selected[si];
      for (int pos = std::max(c.seqs[si].sparse_prefix, 0); pos <= qpos; ++pos) keys.push_back(pos);
      for (int h = 0; h < c.n_heads; ++h) {
        const int kvh = h / group;
        const double *qv = &qd[(size_t(row) * c.n_heads + h) * hd];
        std::vector<double> s(keys.size());
        double m = -INFINITY;
        auto base = [&](int pos) {
          const int slot =
              table[page_off[si] + pos / c.page_size] * c.page_size + pos % c.page_size;
          return (size_t(slot) * c.n_kv_heads + kvh) * hd;
        };
        for (size_t j = 0; j < keys.size(); ++j) {
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += qv[d] * kd[base(keys[j]) + d];
          s[j] = dot / std::sqrt(double(hd));
          m = std::max(m, s[j]);
        }
        const int cslot = row_slot[row];
        for (int j = 0; cslot >= 0 && j < cap_cand[si]; ++j) {
          // Stored in fp16: half a unit in the last place (2^-11 relative) on
          // top of the float computation's error.
          const float g = got_l[(size_t(cslot) * c.n_heads + h) * cap_stride + j];
          if (!(std::abs(g - s[j]) <= 1e-4 + (1e-4 + 0x1p-11) * std::abs(s[j])) && cap_bad++ < 5)
            ADD_FAILURE() << "capture logit seq " << si << " row " << r << " head " << h << " pos "
                          << j << ": " << g << " vs " << s[j];
        }
        double sum = 0;
        for (auto &x : s) sum += (x = std::exp(x - m));
        if (cslot >= 0) {
          const double lse = m + std::log(sum);
          const float g = got_e[size_t(cslot) * c.n_heads + h];
          if (!(std::abs(g - lse) <= 1e-4 + 1e-4 * std::abs(lse)) && cap_bad++ < 5)
            ADD_FAILURE() << "capture lse seq " << si << " row " << r << " head " << h << ": " << g
                          << " vs " << lse;
        }
        double *o = &ref[(size_t(row) * c.n_heads + h) * hd];
        for (size_t j = 0; j < keys.size(); ++j)
          for (int d = 0; d < hd; ++d) o[d] += s[j] / sum * vd[base(keys[j]) + d];
      }
    }
  }
  const auto got = bf16_vec_to_float(out.download());
  EXPECT_LT(rel_l2(got, ref), 5e-3)
      << "splits " << c.n_splits << " head_dim " << hd << (fp8 ? " fp8 cache" : "");
  EXPECT_EQ(cap_bad, 0);
}

// Every case with the bf16 cache and with the fp8 cache.
void run_case(const Case &c, uint32_t seed) {
  run_case_as(c, seed, false);
  run_case_as(c, seed, true);
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

// One-row batches run on decode_attention.cu (register streaming, its own
// split and group reductions): every GQA group it is built for (1, 2, 4, 8),
// both head_dims, page size 8, lengths that end inside a warp step, one to 64
// splits (more splits than keys: empty splits must merge as nothing), an 8K
// context, sparse rows mixed with dense ones; splits merged by the merge
// kernel or in the kernel (split counters, run twice: they must be reset;
// with read_ahead, whose first loads skip the row's own key until the wait);
// both the tensor-core and the CUDA-core variant.
TEST_F(Attention, DecodeKernelGroupsAndSplits) {
  for (int hd : {64, 128})
    for (int kv : {8, 4, 2, 1})
      for (int splits : {1, 5, 64})
        for (bool merge_in_kernel : {false, true})
          run_case({8,
                    kv,
                    hd,
                    8,
                    {{0, 1}, {17, 1}, {63, 1}, {1000, 1}, {8191, 1}},
                    splits,
                    merge_in_kernel},
                   61 + hd + kv + splits);
  run_case({16, 2, 128, 16, {{3000, 1, 2900, 123}, {77, 1}, {4500, 1, 100, 50}}, 7, true}, 62);
  // The CUDA-core kernel's wide blocks (decode_wide: sixteen warps up to four
  // heads a group, eight above): splits shorter and longer than one block
  // step, sparse rows among dense ones.
  for (int hd : {64, 128})
    for (int kv : {8, 4, 2, 1})
      for (int splits : {1, 16, 64})
        run_case({8,
                  kv,
                  hd,
                  8,
                  {{0, 1}, {63, 1}, {1000, 1}, {2047, 1}, {8191, 1}},
                  splits,
                  true,
                  false,
                  1},
                 90 + hd + kv + splits);
  run_case({16, 4, 128, 16, {{3000, 1, 2900, 123}, {77, 1}, {4500, 1, 100, 50}}, 7, true, false, 1},
           91);
  // Groups of 5, 6 and 7 query heads (Qwen2.5-7B's 28 over 4), four-warp and
  // wide blocks, head_dim 64 and 128.
  for (const auto &[heads, kv] : std::vector<std::pair<int, int>>{{10, 2}, {12, 2}, {28, 4}})
    for (int hd : {64, 128})
      for (int splits : {1, 16})
        for (int wide : {0, 1})
          run_case({heads,
                    kv,
                    hd,
                    16,
                    {{0, 1}, {700, 1}, {2047, 1, 1900, 90}, {5000, 1}},
                    splits,
                    true,
                    false,
                    wide},
                   110 + heads + kv + hd + splits + wide);
  // Head_dim 64 with groups 4 and 8 runs on the tensor-core variant
  // (decode_attention_mma.cu) up to 64 (sequence, KV head) pairs; past that,
  // the CUDA-core kernel: 80 pairs, sparse rows among them.
  std::vector<SeqSpec> many;
  for (int i = 0; i < 40; ++i)
    many.push_back(i % 5 == 0 ? SeqSpec{700 + i, 1, 650, 40} : SeqSpec{(37 * i) % 900, 1});
  for (int kv : {2, 1}) run_case({8, kv, 64, 16, many, 4, true}, 63 + kv);
  // Pages of 12 slots: slots located by division instead of shifts, in both variants.
  for (int kv : {8, 2, 1})
    run_case({8, kv, 64, 12, {{0, 1}, {11, 1}, {12, 1}, {777, 1}, {2900, 1, 2800, 57}}, 5, true},
             66 + kv);
  run_case({8, 2, 64, 12, many, 3, true}, 68);
  // Sparse drafting (sparse_step) keeps the tensor-core variant up to 128
  // pairs: 60 sparse sequences x 2 KV heads, a few short enough to be dense.
  std::vector<SeqSpec> drafts;
  for (int i = 0; i < 60; ++i)
    drafts.push_back(i % 7 == 3 ? SeqSpec{(53 * i) % 120, 1}
                                : SeqSpec{600 + 97 * i, 1, 560 + 97 * i, 30 + i});
  for (int splits : {1, 4})
    run_case({8, 2, 64, 16, drafts, splits, true, /*sparse_step=*/true}, 69 + splits);
  // Sixteen sequences (32 pairs) of a bf16 sparse step take the deep stages
  // (decode_attention_mma.cu, kDeepStages: every look-up of a warp's first
  // steps before its copies): sets from ~100 keys to ~1,400 (a warp's steps
  // past its prologue at one split), a few dense rows, one to four splits.
  std::vector<SeqSpec> few;
  for (int i = 0; i < 16; ++i)
    few.push_back(i % 5 == 2 ? SeqSpec{(41 * i) % 100, 1}
                             : SeqSpec{2000 + 331 * i, 1, 1900 + 331 * i, 40 + 83 * i});
  for (int splits : {1, 2, 4})
    run_case({8, 2, 64, 16, few, splits, true, /*sparse_step=*/true}, 75 + splits);
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

// Every other instantiated head_dim (the tiny fixture models' 16, Phi's 80 and
// 96, Gemma's 256, ...): decode, verification and prefill rows, GQA 4 and the
// fixtures' 4/2 heads, with and without split-K; 256 is also run at 8K context.
TEST_F(Attention, OtherHeadDims) {
  for (int hd : {16, 32, 48, 80, 96, 112, 160, 192, 256})
    for (int splits : {1, 4})
      run_case({8, 2, hd, 16, {{0, 1}, {300, 1}, {40, 5}, {100, 90}, {0, 70}}, splits},
               51 + hd + splits);
  run_case({4, 2, 16, 16, {{0, 7}, {7, 1}, {3, 2}}, 1}, 52);
  run_case({8, 1, 256, 16, {{8191, 1}, {8000, 3}}, 8}, 53);
}

// The instantiated head_dims are supported, others are refused at model load
// with UNSUPPORTED (checked before any device access: this runs without a GPU).
TEST(AttentionSupport, UnsupportedHeadDimRefusedAtLoad) {
  for (int hd : {16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 256})
    EXPECT_TRUE(kernels::paged_attention_supports(hd, 4)) << hd;
  for (int hd : {0, 8, 24, 40, 72, 100, 264, 512})
    EXPECT_FALSE(kernels::paged_attention_supports(hd, 4)) << hd;
  EXPECT_FALSE(kernels::paged_attention_supports(64, 65));
  ModelConfig c;
  c.vocab_size = 64;
  c.hidden_size = 96;
  c.intermediate_size = 64;
  c.n_layers = 1;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 24;
  c.max_position = 128;
  try {
    create_cuda_backend_synthetic(c, 1, CudaBackendOptions{});
    ADD_FAILURE() << "head_dim 24 was accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_UNSUPPORTED) << e.what();
    EXPECT_NE(std::string(e.what()).find("head_dim 24"), std::string::npos) << e.what();
  }
}

// Long context: 16K tokens, decode and verify rows, split-K with the merge.
TEST_F(Attention, LongContext16K) {
  run_case({32, 8, 128, 16, {{16383, 1}, {16000, 4}}, 16}, 21);
  run_case({8, 2, 64, 16, {{16383, 1}}, 64}, 22);
}

// Sparse drafting: each decode row attends to a random sorted selection below
// its prefix plus every position from the prefix on; selections differ per
// layer (layer kLayer of a 3-layer record is used), mixed with dense rows, with
// and without split-K, up to a 16K context. A wrong selection, layer offset or
// key mapping changes the output far beyond the tolerance.
TEST_F(Attention, SparseDraftRows) {
  for (int hd : {64, 128})
    for (int splits : {1, 4, 16})
      run_case({8,
                2,
                hd,
                16,
                {{300, 1, 280, 37}, {5000, 1, 4900, 900}, {777, 1}, {70, 1, 0, 0}},
                splits},
               31 + hd + splits);
  // 16K context, a large selection spanning many tiles, and a multi-row draft.
  run_case({32, 8, 128, 16, {{16383, 1, 16000, 3000}, {9000, 3, 8990, 1234}}, 16}, 37);
}

// Score capture: verification rows (1+gamma, causal) and a prefill chunk, all
// rows captured, candidates a prefix of the visible keys; logits and lse are
// compared with the float64 reference, poisoned (NaN) buffers catch missing
// writes; the splits path takes the lse from the merge kernel.
TEST_F(Attention, CaptureLogitsAndLse) {
  for (int splits : {1, 4})
    run_case({8, 2, 64, 16, {{600, 5, -1, 0, 600}, {40, 3, -1, 0, 17}, {300, 1}}, splits},
             41 + splits);
  run_case({32, 8, 128, 16, {{8000, 4, -1, 0, 7999}, {0, 40, -1, 0, 1}}, 8}, 43);
  // Capture and sparse sequences in one batch.
  run_case({8, 2, 128, 16, {{1000, 2, -1, 0, 1000}, {2000, 1, 1500, 100}}, 2}, 44);
}

}  // namespace
}  // namespace vegas::test
