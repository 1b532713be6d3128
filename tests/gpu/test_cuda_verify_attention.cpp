// Tensor-core verify attention (kernels/verify_attention.cuh: the tiled and the
// warps kernel, each where it applies) against a float64
// host reference and against the paged kernel, on random Q/K/V with scattered
// page tables: verification-sized sequences (2, 5, 7, 8, 33, 64 rows) at short
// and 8K contexts, GQA groups 1, 4 and 8, head_dim 64 and 128, splits 1, 4 and
// 16, with score capture on some rows, mixed with sequences the paged kernel
// keeps (sparse drafting, more than 64 rows); one-row dense sequences (decode
// rows, a gamma-0 verification) are the verify kernel's whenever it runs.
//
// Tolerances. Output: inputs are exact bf16 values and accumulation is f32;
// the output is rounded to bf16 (relative step 2^-8, RMS error ~1.1e-3) and
// the tensor-core kernel also rounds the softmax weights P to bf16 before P·V
// (another ~1.1e-3 RMS), so the relative L2 error against float64 must stay
// under 5e-3 (as for the paged and prefill kernels); an indexing or masking
// fault gives errors of order 1. Captured logits: the products of bf16 values
// are exact in f32 and the sum of head_dim of them (|q| < 2, |k| < 1) loses at
// most head_dim * 2^-24 * sum|q k| ~ 2e-3 before the 1/sqrt(head_dim) scale,
// ~1e-4 typically far less, so 5e-4 absolute. LSE: an f32 sum of up to 8K
// exp2 terms (relative error ~1e-5 typical, 5e-4 worst) plus a few ulps of
// exp2/log2, so 1e-3 absolute in natural-log units.
//
// `[verify-attn]` lines report the measured errors and, for 16 sequences x 7
// rows at 8K context (embedded model 8/2 heads x 64, Qwen3-8B 32/8 x 128), the
// time of the tensor-core path (verify kernel + the paged kernel's merge, as
// CudaContext runs it) next to the paged kernel's (cudaEvent, 3 warm-ups,
// median of 15).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>

#include "gpu_test_util.h"
#include "paged_attention.cuh"
#include "verify_attention.cuh"

namespace vegas::test {
namespace {

struct SeqSpec {
  int start_pos;
  int n_rows;
  int sparse_prefix = -1;  // >= 0: rows attend to n_selected random positions below it, then on
  int n_selected = 0;
  int n_cand = 0;                 // > 0: capture scores of positions [0, n_cand) ...
  std::vector<int> capture_rows;  // ... for these rows
};

struct Shape {
  int n_heads, n_kv_heads, head_dim, page_size;
  // fp8 caches (kernels/kv_fp8.cuh), the host's K/V the values their codes
  // stand for: the kernels expand them exactly, so the bounds are the same.
  bool fp8 = false;
};

std::string describe(const Shape &sh) {
  return "heads " + std::to_string(sh.n_heads) + "/" + std::to_string(sh.n_kv_heads) +
         " head_dim " + std::to_string(sh.head_dim) + " page " + std::to_string(sh.page_size) +
         (sh.fp8 ? " fp8 cache" : "");
}

bool is_poison(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u == 0xffffffffu;
}

// A batch on the device with its host copy; out and the capture buffers are
// poisoned (NaN) by reset().
struct Batch {
  static constexpr int kMaxSplits = 16;
  Shape sh;
  std::vector<SeqSpec> seqs;
  std::vector<int32_t> table, page_off, row_start, n_rows, start_pos, sparse_data, sparse_off;
  std::vector<int32_t> cap_cand, row_cap_slot;
  std::vector<std::vector<int32_t>> selected;
  std::vector<uint16_t> kh, vh, qh;
  int rows = 0, max_rows = 0, cap_slots = 0, cap_stride = 0;
  std::unique_ptr<Dev<uint16_t>> k, v, q, out;
  Fp8DeviceCache fp8;  // sh.fp8: the caches the kernels read
  std::unique_ptr<Dev<int32_t>> dt, dpo, drs, dnr, dsp, dsd, dso, dcc, drc;
  std::unique_ptr<Dev<float>> po, pl, clse;
  std::unique_ptr<Dev<uint16_t>> clog;  // fp16 scores
  std::unique_ptr<Dev<int32_t>> split_counters;

  size_t out_size() const { return size_t(rows) * sh.n_heads * sh.head_dim; }
  size_t cap_size() const { return size_t(std::max(cap_slots, 1)) * sh.n_heads * cap_stride; }
  // What defers_to_verify selects at verify_max_rows = kVerifyMaxRows (no prefill kernel here).
  bool verified(size_t s) const {
    return n_rows[s] >= 1 && n_rows[s] <= kernels::kVerifyMaxRows && sparse_off[s] == -1;
  }

  // cap_align: capture rows padded to a multiple of that many scores (the
  // runtime pads to 4, CudaContext::stage).
  Batch(const Shape &shape, const std::vector<SeqSpec> &specs, uint32_t seed, int cap_align = 1)
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
      cap_cand.push_back(s.n_cand);
      cap_stride = std::max(cap_stride, s.n_cand);
      for (int r = 0; r < s.n_rows; ++r) {
        const bool cap = s.n_cand > 0 && std::find(s.capture_rows.begin(), s.capture_rows.end(),
                                                   r) != s.capture_rows.end();
        row_cap_slot.push_back(cap ? cap_slots++ : -1);
      }
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
    cap_stride = (std::max(cap_stride, 1) + cap_align - 1) / cap_align * cap_align;
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
    dcc = std::make_unique<Dev<int32_t>>(cap_cand);
    drc = std::make_unique<Dev<int32_t>>(row_cap_slot);
    po = std::make_unique<Dev<float>>(size_t(kMaxSplits) * out_size());
    pl = std::make_unique<Dev<float>>(size_t(kMaxSplits) * rows * sh.n_heads);
    clog = std::make_unique<Dev<uint16_t>>(cap_size());
    clse = std::make_unique<Dev<float>>(size_t(std::max(cap_slots, 1)) * sh.n_heads);
    split_counters =
        std::make_unique<Dev<int32_t>>(std::vector<int32_t>(seqs.size() * sh.n_kv_heads, 0));
  }

  void reset() const {
    cudaMemset(out->get(), 0xff, out_size() * sizeof(uint16_t));
    cudaMemset(clog->get(), 0xff, cap_size() * sizeof(uint16_t));
    cudaMemset(clse->get(), 0xff, size_t(std::max(cap_slots, 1)) * sh.n_heads * sizeof(float));
  }

  // verify_max_rows 0: the paged kernel alone; kVerifyMaxRows: the verify path.
  // counters: split counters (zeros), with which the warps kernel merges its own splits.
  kernels::PagedAttentionParams params(int verify_max_rows, int n_splits, bool capture,
                                       int read_ahead = 0, bool counters = false) const {
    kernels::PagedAttentionParams p;
    p.read_ahead = read_ahead;
    if (counters) p.split_counters = split_counters->get();
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
    // As the runtime sets it: the fp8 warps kernel picks its step by the keys
    // a split gets, so at 8K the split counts below reach both of its forms.
    for (size_t si = 0; si < seqs.size(); ++si)
      p.max_keys = std::max(p.max_keys, start_pos[si] + n_rows[si]);
    p.n_splits = n_splits;
    p.partial_out = po->get();
    p.partial_lse = pl->get();
    p.total_rows = rows;
    p.sparse_data = dsd->get();
    p.seq_sparse_off = dso->get();
    p.n_layers = 1;
    p.layer = 0;
    if (capture && cap_slots > 0) {
      p.cap_logits = clog->as<kernels::f16>();
      p.cap_lse = clse->get();
      p.row_cap_slot = drc->get();
      p.seq_cap_cand = dcc->get();
      p.cap_stride = cap_stride;
    }
    p.verify_max_rows = verify_max_rows;
    return p;
  }

  // Float64 attention of (sequence si, row r, head h): o[head_dim], and for a
  // captured row its logits (NaN where not visible) and natural-log LSE.
  void reference(size_t si, int r, int h, double *o, double *logits, double *lse) const {
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
      if (logits != nullptr && keys[j] < cap_cand[si]) logits[keys[j]] = s[j];
    }
    for (auto &x : s) sum += (x = std::exp(x - m));
    if (lse != nullptr) *lse = m + std::log(sum);
    std::fill(o, o + hd, 0.0);
    for (size_t j = 0; j < keys.size(); ++j) {
      const size_t b = base(keys[j]);
      for (int d = 0; d < hd; ++d) o[d] += s[j] / sum * bf16_to_f32(vh[b + d]);
    }
  }

  struct Ref {
    std::vector<double> out, logits, lse;  // logits NaN = must stay unwritten
  };
  Ref reference_all() const {
    Ref ref;
    ref.out.resize(out_size());
    ref.logits.assign(cap_size(), NAN);
    ref.lse.assign(size_t(std::max(cap_slots, 1)) * sh.n_heads, NAN);
    const int hd = sh.head_dim;
    for (size_t si = 0; si < seqs.size(); ++si) {
#pragma omp parallel for collapse(2) schedule(dynamic)
      for (int r = 0; r < n_rows[si]; ++r)
        for (int h = 0; h < sh.n_heads; ++h) {
          const int slot = row_cap_slot[row_start[si] + r];
          const size_t ch = size_t(slot) * sh.n_heads + h;
          reference(si, r, h, &ref.out[(size_t(row_start[si] + r) * sh.n_heads + h) * hd],
                    slot >= 0 ? &ref.logits[ch * cap_stride] : nullptr,
                    slot >= 0 ? &ref.lse[ch] : nullptr);
        }
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

// Capture buffers against a reference (NaN = must hold the poison): the
// largest absolute error beyond `rounding` * |reference|, counting missing
// or stray writes. The scores are stored in fp16: 2^-11 (half a unit in the
// last place) against float64, 2^-10 between two fp16 captures; lse is float.
constexpr double kF16Rounding = 0x1p-11, kF16PairRounding = 0x1p-10, kNoRounding = 0;
double capture_error(const std::vector<float> &got, const std::vector<double> &ref,
                     size_t *bad_writes, double rounding) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(ref[i])) {
      *bad_writes += !is_poison(got[i]);
    } else if (!std::isfinite(got[i])) {
      ++*bad_writes;
    } else {
      worst = std::max(worst, std::abs(double(got[i]) - ref[i]) - rounding * std::abs(ref[i]));
    }
  }
  return worst;
}

std::vector<double> to_d(const std::vector<float> &v) {
  return {v.begin(), v.end()};
}

using VerifyKernel = cudaError_t (*)(const kernels::PagedAttentionParams &, cudaStream_t);
struct NamedKernel {
  const char *name;
  VerifyKernel run;
  bool merges_splits;  // given split counters
};

// The verify kernels that take a batch: the tiled one always, the warps one
// where it applies (verify_attention runs it then).
std::vector<NamedKernel> verify_kernels(const kernels::PagedAttentionParams &p) {
  std::vector<NamedKernel> k = {{"tiled", kernels::verify_attention_tiled, false}};
  if (kernels::verify_attention_warps_applies(p))
    k.push_back({"warps", kernels::verify_attention_warps, true});
  return k;
}

// A kernel that merges its own splits, alone (no merge kernel after it) at 16
// splits with split counters: its rows and their captured lse against the
// reference, every other row and capture slot untouched (poison), and the
// counters left at zero for the next launch.
void check_own_merge(const Batch &b, const Batch::Ref &ref, const NamedKernel &kernel) {
  b.reset();
  CUDA_OK(kernel.run(b.params(kernels::kVerifyMaxRows, Batch::kMaxSplits, true, 1, true), nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto got = bf16_vec_to_float(b.out->download());
  EXPECT_LT(rel_l2_rows(b, got, ref.out, [&](size_t si) { return b.verified(si); }), 5e-3)
      << "splits merged in the kernel";
  // Capture slots of rows the kernel does not take must keep their poison.
  std::vector<double> want_log = ref.logits, want_lse = ref.lse;
  for (size_t si = 0; si < b.seqs.size(); ++si)
    for (int r = 0; r < b.n_rows[si] && !b.verified(si); ++r) {
      const int slot = b.row_cap_slot[b.row_start[si] + r];
      if (slot < 0) continue;
      for (int h = 0; h < b.sh.n_heads; ++h) {
        const size_t ch = size_t(slot) * b.sh.n_heads + h;
        want_lse[ch] = NAN;
        std::fill_n(want_log.begin() + ch * b.cap_stride, b.cap_stride, NAN);
      }
    }
  size_t bad = 0;
  const double e_log =
      capture_error(f16_vec_to_float(b.clog->download()), want_log, &bad, kF16Rounding);
  const double e_lse =
      b.cap_slots > 0 ? capture_error(b.clse->download(), want_lse, &bad, kNoRounding) : 0.0;
  EXPECT_LT(e_log, 5e-4);
  EXPECT_LT(e_lse, 1e-3) << "captured lse from the kernel's own merge";
  EXPECT_EQ(bad, 0u) << "capture writes";
  for (int32_t n : b.split_counters->download()) EXPECT_EQ(n, 0) << "split counter left set";
}

// One verify kernel on batch b (check_batch lists the runs).
void check_kernel(const Batch &b, const Batch::Ref &ref, const NamedKernel &kernel) {
  const Shape &sh = b.sh;
  const std::vector<SeqSpec> &seqs = b.seqs;
  SCOPED_TRACE(describe(sh) + ", " + kernel.name + " kernel");
  auto is_verify = [&](size_t si) { return b.verified(si); };
  auto is_paged = [&](size_t si) { return !b.verified(si); };
  bool any_paged = false;
  for (size_t si = 0; si < seqs.size(); ++si) any_paged = any_paged || !b.verified(si);
  const int mv = kernels::kVerifyMaxRows;

  std::vector<float> prod_out, prod_log, prod_lse;
  for (int splits : {1, 4, Batch::kMaxSplits}) {
    b.reset();
    // As CudaContext::enqueue: the paged kernel only when it has sequences,
    // else its merge alone, unless the verify kernel merged (split counters
    // at 16 splits).
    const bool counters = splits == Batch::kMaxSplits;
    const auto p = b.params(mv, splits, true, splits == 4, counters);
    CUDA_OK(kernel.run(p, nullptr));
    if (any_paged)
      CUDA_OK(kernels::paged_attention(p, nullptr));
    else if (!(counters && kernel.merges_splits))
      CUDA_OK(kernels::paged_attention_merge(p, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto got = bf16_vec_to_float(b.out->download());
    const auto log = f16_vec_to_float(b.clog->download()), lse = b.clse->download();
    const double e_ver = rel_l2_rows(b, got, ref.out, is_verify);
    const double e_paged = rel_l2_rows(b, got, ref.out, is_paged);
    size_t bad = 0;
    const double e_log = capture_error(log, ref.logits, &bad, kF16Rounding);
    const double e_lse = b.cap_slots > 0 ? capture_error(lse, ref.lse, &bad, kNoRounding) : 0.0;
    std::printf(
        "[verify-attn] %s, %s kernel, splits %2d: rel L2 vs float64: tensor-core rows %.2e, paged "
        "rows "
        "%.2e; capture (%d rows) max |err| logits %.2e, lse %.2e, missing/stray writes %zu\n",
        describe(sh).c_str(), kernel.name, splits, e_ver, e_paged, b.cap_slots, e_log, e_lse, bad);
    EXPECT_LT(e_ver, 5e-3) << "verify rows, splits " << splits;
    if (any_paged) EXPECT_LT(e_paged, 5e-3) << "paged rows, splits " << splits;
    EXPECT_LT(e_log, 5e-4) << "captured logits, splits " << splits;
    EXPECT_LT(e_lse, 1e-3) << "captured lse, splits " << splits;
    EXPECT_EQ(bad, 0u) << "capture writes, splits " << splits;
    if (splits == 1) prod_out = got, prod_log = log, prod_lse = lse;
  }

  b.reset();
  CUDA_OK(kernel.run(b.params(mv, 1, true), nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto raw = b.out->download();
  EXPECT_LT(rel_l2_rows(b, bf16_vec_to_float(raw), ref.out, is_verify), 5e-3)
      << "verify kernel alone";
  const size_t per_row = size_t(sh.n_heads) * sh.head_dim;
  size_t stray = 0;
  for (size_t si = 0; si < seqs.size(); ++si)
    if (!b.verified(si))
      for (size_t i = b.row_start[si] * per_row; i < (b.row_start[si] + b.n_rows[si]) * per_row;
           ++i)
        stray += raw[i] != 0xffff;
  EXPECT_EQ(stray, 0u) << "the verify kernel wrote rows of sequences it does not take";
  if (kernel.merges_splits) check_own_merge(b, ref, kernel);

  b.reset();
  CUDA_OK(kernels::paged_attention(b.params(0, 1, true), nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto paged = bf16_vec_to_float(b.out->download());
  const auto plog = f16_vec_to_float(b.clog->download()), plse = b.clse->download();
  const double e_vs_paged = rel_l2_rows(b, prod_out, to_d(paged), is_verify);
  size_t bad = 0;
  std::vector<double> plog_d(plog.size()), plse_d(plse.size());
  for (size_t i = 0; i < plog.size(); ++i) plog_d[i] = is_poison(plog[i]) ? NAN : plog[i];
  for (size_t i = 0; i < plse.size(); ++i) plse_d[i] = is_poison(plse[i]) ? NAN : plse[i];
  const double e_log = capture_error(prod_log, plog_d, &bad, kF16PairRounding);
  const double e_lse = b.cap_slots > 0 ? capture_error(prod_lse, plse_d, &bad, kNoRounding) : 0.0;
  std::printf(
      "[verify-attn] %s, %s kernel: paged kernel alone %.2e vs float64; tensor-core vs paged: "
      "output %.2e, "
      "logits %.2e, lse %.2e, differing writes %zu\n",
      describe(sh).c_str(), kernel.name, rel_l2(paged, ref.out), e_vs_paged, e_log, e_lse, bad);
  EXPECT_LT(rel_l2(paged, ref.out), 5e-3);
  EXPECT_LT(e_vs_paged, 7e-3);
  EXPECT_LT(e_log, 5e-4);
  EXPECT_LT(e_lse, 1e-3);
  EXPECT_EQ(bad, 0u);
}

// Every way to run a batch, each against the reference, for each verify
// kernel that takes it:
//  1. as in production (the verify kernel, then the paged kernel or its merge
//     alone) at splits 1, 4 and 16, with capture: all rows, logits and lse;
//     read-ahead (keys below the rows' own read before the PDL wait) at 4;
//  2. the verify kernel alone (splits 1) on poisoned buffers: no write to
//     rows of sequences it does not take;
//  3. the paged kernel alone, compared with run 1 (output and capture).
void check_batch_as(const Shape &sh, const std::vector<SeqSpec> &seqs, uint32_t seed,
                    int cap_align) {
  Batch b(sh, seqs, seed, cap_align);
  CUDA_OK(kernels::paged_attention_init());
  CUDA_OK(kernels::verify_attention_init());
  const auto ref = b.reference_all();
  for (const NamedKernel &k : verify_kernels(b.params(kernels::kVerifyMaxRows, 1, true)))
    check_kernel(b, ref, k);
}

// Every batch with bf16 caches and with fp8 caches.
void check_batch(const Shape &sh, const std::vector<SeqSpec> &seqs, uint32_t seed,
                 int cap_align = 1) {
  check_batch_as(sh, seqs, seed, cap_align);
  Shape fp8 = sh;
  fp8.fp8 = true;
  check_batch_as(fp8, seqs, seed, cap_align);
}

class VerifyAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

// Verified sequences of 1, 2, 5, 7, 8, 33 and 64 rows (captured rows among
// them, one capturing past its own rows so masked positions must stay
// unwritten, one whose context is shorter than a tile; a decode row and a
// captured gamma-0 verification of one row) next to paged ones: a sparse
// draft, 65 rows.
std::vector<SeqSpec> mixed() {
  return {{3000, 7, -1, 0, 2900, {0, 6}},
          {2500, 1, -1, 0, 2501, {0}},
          {500, 2, -1, 0, 505, {0, 1}},
          {1234, 5},
          {10, 8, -1, 0, 18, {0, 3, 7}},
          {777, 33, -1, 0, 700, {32}},
          {60, 64},
          {900, 1},
          {2000, 7, 1500, 300},
          {100, 65}};
}

TEST_F(VerifyAttention, MatchesReferenceHeadDim64) {
  for (int group : {1, 4, 8}) check_batch({2 * group, 2, 64, 16}, mixed(), 100 + group);
}

TEST_F(VerifyAttention, MatchesReferenceHeadDim128) {
  for (int group : {1, 4, 8}) check_batch({2 * group, 2, 128, 16}, mixed(), 200 + group);
}

// Blocks of one and two 16-vector M tiles (at most 16 or 32 vectors per
// sequence; the batches above use four): 8 rows x group 1 or 2, 2 rows x 8.
TEST_F(VerifyAttention, SmallTiles) {
  const std::vector<SeqSpec> seqs = {
      {4000, 8, -1, 0, 3990, {0, 7}}, {33, 5, -1, 0, 36, {1, 4}}, {70, 2}, {1000, 1}};
  check_batch({2, 2, 64, 16}, seqs, 401);   // group 1: 8 vectors, one M tile
  check_batch({4, 2, 128, 16}, seqs, 402);  // group 2: 16 vectors, one M tile
  check_batch({8, 4, 64, 8}, seqs, 403);    // group 2: 16 vectors, page size 8
  check_batch({16, 2, 64, 16}, {{5000, 2, -1, 0, 5000, {0, 1}}, {40, 4}}, 404);  // 32: two
}

// Batches the warps kernel (verify_attention_warps.cu) takes: at most 32 query
// vectors per sequence and KV head, captured rows among them (one capturing
// past its own rows, masked positions must stay unwritten), contexts shorter
// than one warp step and than the steps read ahead (the rows' own keys then
// fall in the steps copied before the PDL wait), a one-row sequence, and a
// sparse draft that the paged kernel keeps. Every shape is checked to be
// the warps kernel's, so that this test cannot pass on the tiled kernel alone.
std::vector<SeqSpec> warps_batch(int max_rows) {
  auto rows = [&](int n) { return std::min(n, max_rows); };
  return {{3000, rows(7), -1, 0, 2900, {0, rows(7) - 1}},
          {500, 2, -1, 0, 505, {0, 1}},
          {1234, rows(5)},
          {10, rows(8), -1, 0, 18, {0, rows(8) - 1}},
          {3, rows(4), -1, 0, 7, {rows(4) - 1}},
          {0, 2},
          {200, rows(6)},
          {900, 1},
          {2000, rows(7), 1500, 300}};
}

TEST_F(VerifyAttention, WarpsKernelMatchesReference) {
  struct Run {
    Shape sh;
    int max_rows;
  };
  for (const Run &r : {Run{{8, 2, 64, 16}, 8},   // GQA 4: two M tiles
                       Run{{8, 2, 64, 8}, 8},    // page size 8
                       Run{{8, 2, 64, 12}, 8},   // pages located by division
                       Run{{16, 2, 64, 16}, 4},  // GQA 8: 4 rows, two M tiles
                       Run{{8, 4, 64, 16}, 8},   // GQA 2: one M tile
                       Run{{4, 4, 64, 16}, 8}}) {
    const Batch b(r.sh, warps_batch(r.max_rows), 1);
    ASSERT_TRUE(kernels::verify_attention_warps_applies(b.params(kernels::kVerifyMaxRows, 1, true)))
        << describe(r.sh);
    check_batch(r.sh, warps_batch(r.max_rows), 500 + r.sh.n_heads + r.sh.page_size);
  }
  // GQA 1: 32 rows, the most vectors the kernel takes.
  check_batch({2, 2, 64, 16}, {{4000, 32, -1, 0, 4000, {0, 31}}, {40, 17}, {1, 1}}, 520);
}

// The production shape: 16 sequences x 7 rows at ~8K, rows 0 and 6 captured
// over the whole context; embedded-model and Qwen3-8B heads.
std::vector<SeqSpec> verify_8k(bool capture) {
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < 16; ++i) {
    SeqSpec s{8192 - 7 - 13 * i, 7};
    if (capture) s.n_cand = s.start_pos, s.capture_rows = {0, 6};
    seqs.push_back(s);
  }
  return seqs;
}

// Also with the runtime's capture rows (padded to 4 scores), whose even
// stride takes the verify kernel's paired stores, which an odd one never reaches.
TEST_F(VerifyAttention, MatchesReference8K) {
  check_batch({8, 2, 64, 16}, verify_8k(true), 301);
  check_batch({32, 8, 128, 16}, verify_8k(true), 302);
  check_batch({8, 2, 64, 16}, verify_8k(true), 303, 4);
  check_batch({32, 8, 128, 16}, verify_8k(true), 304, 4);
}

// Read-ahead (keys below the verified rows' own loaded before the PDL wait)
// at every split count, not only at 4 (check_kernel): one long sequence of 11
// rows at 2K and at 8K, and two of 16 / 9, as lookup rounds at few sequences
// verify them, on bf16 and fp8 caches, each kernel followed by the merge.
TEST_F(VerifyAttention, ReadAheadAtEverySplitCount) {
  const std::vector<std::vector<SeqSpec>> batches = {
      {{2048 - 11, 11}}, {{8192 - 11, 11}}, {{8192 - 16, 16}, {8000 - 9, 9}}};
  for (bool fp8 : {false, true})
    for (const std::vector<SeqSpec> &seqs : batches) {
      Shape sh{8, 2, 64, 16};
      sh.fp8 = fp8;
      Batch b(sh, seqs, 321);
      const auto ref = b.reference_all();
      for (const NamedKernel &k : verify_kernels(b.params(kernels::kVerifyMaxRows, 1, false)))
        for (int z : {2, 4, 8, 16}) {
          SCOPED_TRACE(describe(sh) + ", " + k.name + " kernel, " + std::to_string(seqs.size()) +
                       " sequences from " + std::to_string(seqs[0].start_pos) + ", splits " +
                       std::to_string(z));
          b.reset();
          const auto p = b.params(kernels::kVerifyMaxRows, z, false, 1, false);
          CUDA_OK(k.run(p, nullptr));
          CUDA_OK(kernels::paged_attention_merge(p, nullptr));
          CUDA_OK(cudaDeviceSynchronize());
          const auto got = bf16_vec_to_float(b.out->download());
          EXPECT_LT(rel_l2_rows(b, got, ref.out, [&](size_t si) { return b.verified(si); }), 5e-3);
        }
    }
}

// The splits CudaContext::choose_splits picks for a batch of 7-row sequences
// (the paged kernel's 64-vector tiles, `resident` blocks per multiprocessor,
// at least 256 keys per split, a power of two).
int context_splits(const Shape &sh, int n_seqs, int n_keys, int resident) {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const int group = sh.n_heads / sh.n_kv_heads;
  const int q_tile = 7 * group <= 16 ? 16 : 64, rows_per_tile = q_tile / group;
  const int blocks = n_seqs * sh.n_kv_heads * ((7 + rows_per_tile - 1) / rows_per_tile);
  int want = std::min({(resident * sms + blocks - 1) / blocks, (n_keys + 255) / 256, 64});
  int splits = 1;
  while (splits * 2 <= want) splits *= 2;
  return splits;
}

// Each verify kernel that takes the batch, timed with the merge after it at
// the splits CudaContext would pick for it, and by splits.
void time_verify(const char *label, const Shape &sh, bool capture) {
  Batch b(sh, verify_8k(capture), 7);
  CUDA_OK(kernels::paged_attention_init());
  CUDA_OK(kernels::verify_attention_init());
  const int mv = kernels::kVerifyMaxRows;
  b.reset();
  const int paged_splits = std::min(context_splits(sh, 16, 8192, 4), Batch::kMaxSplits);
  const auto pp = b.params(0, paged_splits, capture);
  const double t_paged =
      test::median_launch_ms([&] { return kernels::paged_attention(pp, nullptr); });
  CUDA_OK(cudaGetLastError());
  const auto want = bf16_vec_to_float(b.out->download());
  // K and V of every sequence's keys, read once: the memory floor.
  double bytes = 0;
  for (const auto &s : b.seqs)
    bytes += 2.0 * (s.start_pos + s.n_rows) * sh.n_kv_heads * sh.head_dim * 2;
  for (const NamedKernel &k : verify_kernels(b.params(mv, 1, capture))) {
    auto tc = [&](int z) {  // with the merge kernel after it, or merging its own splits
      const auto p = b.params(mv, z, capture, 1, k.merges_splits);
      return test::median_launch_ms([&] {
        const cudaError_t e = k.run(p, nullptr);
        // (the merge does nothing at z 1)
        return e != cudaSuccess || k.merges_splits ? e : kernels::paged_attention_merge(p, nullptr);
      });
    };
    const int resident = kernels::verify_attention_resident_blocks(b.params(mv, 1, capture));
    const int splits = std::min(context_splits(sh, 16, 8192, resident), Batch::kMaxSplits);
    b.reset();
    const double t_tc = tc(splits);
    CUDA_OK(cudaGetLastError());
    const auto got = bf16_vec_to_float(b.out->download());
    std::string sweep;
    for (int z : {1, 2, 4, 8, 16}) {
      char buf[48];
      std::snprintf(buf, sizeof buf, " %d:%.1f", z, tc(z) * 1e3);
      sweep += buf;
    }
    CUDA_OK(cudaGetLastError());
    const double e = rel_l2(got, to_d(want));
    std::printf(
        "[verify-attn] %s (%s), 16 seqs x 7 rows at ~8K%s, %s kernel, splits %d: %.1f us "
        "(with the merge; %.0f GB/s of K/V, floor %.1f us at 3 TB/s), paged (SIMT) %.1f us, "
        "speedup %.1fx; rel L2 between them %.2e; us by splits:%s\n",
        label, describe(sh).c_str(), capture ? " with rows 0, 6 captured" : "", k.name, splits,
        t_tc * 1e3, bytes / (t_tc * 1e-3) * 1e-9, bytes / 3e12 * 1e6, t_paged * 1e3, t_paged / t_tc,
        e, sweep.c_str());
    EXPECT_LT(e, 7e-3);
    // A loose floor that holds on any tensor-core GPU; the printed numbers are the measurement.
    EXPECT_GT(t_paged / t_tc, 2.0) << "the tensor-core kernel should beat the SIMT kernel";
  }
}

TEST_F(VerifyAttention, Throughput8K) {
  time_verify("embedded model", {8, 2, 64, 16}, false);
  time_verify("embedded model", {8, 2, 64, 16}, true);
  time_verify("Qwen3-8B", {32, 8, 128, 16}, false);
  time_verify("Qwen3-8B", {32, 8, 128, 16}, true);
}

}  // namespace
}  // namespace vegas::test
