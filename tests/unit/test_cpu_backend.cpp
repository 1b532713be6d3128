// The CPU reference backend: paging, causal masking, batching, every
// architecture flavour against an independent naive forward, sparse drafting
// and score capture, and the error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_context.h"
#include "common/error.h"
#include "common/kv_fp8.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/weight_store.h"
#include "support/model_dir.h"
#include "support/reference_forward.h"
#include "support/tiny_model.h"

namespace vegas {
namespace {

using Rows = std::vector<std::vector<float>>;  // logits rows

// Runs `tokens` through one context as consecutive chunks of the given sizes
// (1 = a decode step), every row with logits, and returns them in order.
Rows run_chunks(BackendModel &model, const ContextParams &params,
                const std::vector<int32_t> &tokens, const std::vector<int32_t> &chunks,
                const std::vector<int32_t> &page_table) {
  auto ctx = model.create_context(params);
  const int32_t vocab = model.config().vocab_size;
  Rows out;
  int32_t pos = 0;
  for (int32_t n : chunks) {
    ForwardBatch batch;
    SeqRows s;
    s.tokens = tokens.data() + pos;
    s.n_tokens = n;
    s.start_pos = pos;
    s.page_table = page_table.data();
    s.n_pages = static_cast<int32_t>(page_table.size());
    s.logits = SeqRows::Logits::kAll;
    batch.seqs.push_back(s);
    const float *logits = ctx->forward(batch);
    for (int32_t r = 0; r < n; ++r)
      out.emplace_back(logits + int64_t{r} * vocab, logits + int64_t{r + 1} * vocab);
    pos += n;
  }
  EXPECT_EQ(pos, static_cast<int32_t>(tokens.size()));
  return out;
}

double max_abs_diff(const Rows &a, const Rows &b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t r = 0; r < std::min(a.size(), b.size()); ++r) {
    EXPECT_EQ(a[r].size(), b[r].size());
    for (size_t i = 0; i < std::min(a[r].size(), b[r].size()); ++i)
      m = std::max(m, std::fabs(static_cast<double>(a[r][i]) - b[r][i]));
  }
  return m;
}

std::vector<int32_t> random_tokens(size_t n, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> u(0, vocab - 1);
  std::vector<int32_t> t(n);
  for (int32_t &v : t) v = u(rng);
  return t;
}

// `n` distinct pages out of `pool`, shuffled, so tables are not contiguous.
std::vector<int32_t> shuffled_pages(int32_t n, int32_t pool, uint32_t seed) {
  std::vector<int32_t> all(static_cast<size_t>(pool));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937(seed));
  all.resize(static_cast<size_t>(n));
  return all;
}

ContextParams params(int32_t num_pages, int32_t page_size, int32_t max_rows = 512) {
  ContextParams p;
  p.num_pages = num_pages;
  p.page_size = page_size;
  p.max_rows = max_rows;
  return p;
}

// ------------------------------------------------------------ embedded model

class EmbeddedModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = test::embedded_model_dir();
    config_ = new ModelConfig(load_model_config(dir + "/config.json"));
    store_ = WeightStore::open(dir).release();
    const ModelWeights weights = bind_model_weights(*config_, *store_);
    backend_ = create_cpu_backend(*config_, weights, CpuBackendOptions{}).release();
  }
  static void TearDownTestSuite() {
    delete backend_;
    delete store_;
    delete config_;
  }
  static ModelConfig *config_;
  static WeightStore *store_;
  static BackendModel *backend_;
};
ModelConfig *EmbeddedModel::config_ = nullptr;
WeightStore *EmbeddedModel::store_ = nullptr;
BackendModel *EmbeddedModel::backend_ = nullptr;

// Proves paging and causal masking: the logits of every prompt row are the
// same whether the prompt is prefilled at once, prefilled in part and decoded
// row by row, or chunked unevenly, whatever the page size (16, 4, 1) and
// wherever the pages lie in the pool.
TEST_F(EmbeddedModel, PrefillEqualsChunkedAndDecodeAcrossPagings) {
  const std::vector<int32_t> tokens = random_tokens(45, config_->vocab_size, 7);
  const Rows whole = run_chunks(*backend_, params(8, 16), tokens, {45}, {0, 1, 2});

  // Sanity: real, position-dependent logits (not zeros or one repeated row).
  double spread = 0;
  for (size_t i = 0; i < whole[0].size(); ++i) {
    ASSERT_TRUE(std::isfinite(whole[44][i]));
    spread = std::max(spread, std::fabs(static_cast<double>(whole[44][i]) - whole[0][i]));
  }
  EXPECT_GT(spread, 1.0);

  std::vector<int32_t> decode_chunks = {20};
  decode_chunks.insert(decode_chunks.end(), 25, 1);
  const Rows decoded = run_chunks(*backend_, params(8, 16), tokens, decode_chunks, {5, 3, 7});
  EXPECT_LE(max_abs_diff(whole, decoded), 1e-4);

  const Rows uneven =
      run_chunks(*backend_, params(20, 4), tokens, {7, 1, 13, 1, 1, 22}, shuffled_pages(12, 20, 3));
  EXPECT_LE(max_abs_diff(whole, uneven), 1e-4);

  std::vector<int32_t> ones_then_rest(10, 1);
  ones_then_rest.push_back(35);
  const Rows single_slots =
      run_chunks(*backend_, params(64, 1), tokens, ones_then_rest, shuffled_pages(45, 64, 11));
  EXPECT_LE(max_abs_diff(whole, single_slots), 1e-4);
}

// The fp8 KV cache on the CPU (ContextParams::kv_fp8): every stored K and V
// head lies on the fp8 grid of its own scale (rounding it again changes
// nothing), the cache differs from the f32 run's, and the logits stay close
// to the f32 cache's (e4m3 keeps 3 mantissa bits: the model's outputs move,
// its top choices mostly do not).
TEST_F(EmbeddedModel, Fp8KvCacheRoundsTheStoredValues) {
  const std::vector<int32_t> tokens = random_tokens(40, config_->vocab_size, 17);
  const std::vector<int32_t> table = {0, 1, 2};
  ForwardBatch batch;
  SeqRows s;
  s.tokens = tokens.data();
  s.n_tokens = 40;
  s.page_table = table.data();
  s.n_pages = 3;
  s.logits = SeqRows::Logits::kAll;
  batch.seqs.push_back(s);
  const int32_t vocab = config_->vocab_size;
  const auto f32_ctx = backend_->create_context(params(3, 16));
  const float *f32_rows = f32_ctx->forward(batch);
  const std::vector<float> f32(f32_rows, f32_rows + int64_t{40} * vocab);
  const auto &plain = dynamic_cast<const CpuContext &>(*f32_ctx);
  ContextParams p = params(3, 16);
  p.kv_fp8 = true;
  auto ctx = backend_->create_context(p);
  const float *logits = ctx->forward(batch);
  const auto &cpu = dynamic_cast<const CpuContext &>(*ctx);
  const int32_t hd = config_->head_dim;
  int64_t changed = 0;
  for (int32_t l = 0; l < config_->n_layers; ++l)
    for (const std::vector<float> *cache : {&cpu.k_cache(l), &cpu.v_cache(l)})
      for (int32_t t = 0; t < 40; ++t)
        for (int32_t h = 0; h < config_->n_kv_heads; ++h) {
          const float *head = cache->data() + (int64_t{t} * config_->n_kv_heads + h) * hd;
          std::vector<float> again(head, head + hd);
          round_head_to_fp8(again.data(), hd);
          ASSERT_EQ(again, std::vector<float>(head, head + hd)) << "layer " << l << " token " << t;
        }
  for (size_t i = 0; i < plain.k_cache(0).size(); ++i)
    changed += plain.k_cache(0)[i] != cpu.k_cache(0)[i];
  EXPECT_GT(changed, 40 * hd) << "the fp8 cache holds the f32 values";
  int agree = 0;
  for (int32_t r = 0; r < 40; ++r) {
    const float *row = logits + int64_t{r} * vocab, *ref = f32.data() + int64_t{r} * vocab;
    agree += std::max_element(row, row + vocab) - row == std::max_element(ref, ref + vocab) - ref;
  }
  EXPECT_GE(agree, 36) << "top-1 of the fp8 cache's logits against the f32 cache's, of 40 rows";
}

// Proves batching: two sequences decoded together, with mixed prefill chunks,
// decode rows and kNone/kLast/kAll logits, give each sequence exactly the
// logits it gets alone, returned in batch order.
TEST_F(EmbeddedModel, TwoSequencesInOneBatchMatchEachAlone) {
  const int32_t vocab = config_->vocab_size;
  const std::vector<int32_t> x = random_tokens(30, vocab, 21);
  const std::vector<int32_t> y = random_tokens(18, vocab, 22);
  const Rows x_alone = run_chunks(*backend_, params(8, 8), x, {30}, {0, 1, 2, 3});
  const Rows y_alone = run_chunks(*backend_, params(8, 8), y, {18}, {0, 1, 2});

  auto ctx = backend_->create_context(params(16, 8));
  const std::vector<int32_t> x_pages = {0, 2, 4, 6}, y_pages = {1, 3, 5};
  auto rows = [&](const std::vector<int32_t> &t, const std::vector<int32_t> &pages, int32_t from,
                  int32_t to, SeqRows::Logits logits) {
    SeqRows s;
    s.tokens = t.data() + from;
    s.n_tokens = to - from;
    s.start_pos = from;
    s.page_table = pages.data();
    s.n_pages = static_cast<int32_t>(pages.size());
    s.logits = logits;
    return s;
  };
  // Checks logits row `i` of the last batch against `want`.
  auto expect_row = [&](const float *logits, int32_t i, const std::vector<float> &want) {
    double m = 0;
    for (int32_t v = 0; v < vocab; ++v)
      m = std::max(m, std::fabs(static_cast<double>(logits[int64_t{i} * vocab + v]) - want[v]));
    EXPECT_LE(m, 1e-4) << "logits row " << i;
  };

  ForwardBatch b1;
  b1.seqs = {rows(x, x_pages, 0, 20, SeqRows::Logits::kAll),
             rows(y, y_pages, 0, 10, SeqRows::Logits::kLast)};
  ASSERT_EQ(b1.logit_rows(), 21);
  const float *l1 = ctx->forward(b1);
  for (int32_t r = 0; r < 20; ++r) expect_row(l1, r, x_alone[r]);
  expect_row(l1, 20, y_alone[9]);

  ForwardBatch b2;
  b2.seqs = {rows(y, y_pages, 10, 11, SeqRows::Logits::kAll),
             rows(x, x_pages, 20, 21, SeqRows::Logits::kNone)};
  const float *l2 = ctx->forward(b2);
  expect_row(l2, 0, y_alone[10]);

  ForwardBatch b3;
  b3.seqs = {rows(x, x_pages, 21, 30, SeqRows::Logits::kAll),
             rows(y, y_pages, 11, 18, SeqRows::Logits::kLast)};
  const float *l3 = ctx->forward(b3);
  for (int32_t r = 0; r < 9; ++r) expect_row(l3, r, x_alone[21 + r]);
  expect_row(l3, 9, y_alone[17]);
}

// Proves thread-count independence: one thread and the default team give the
// same logits (the GEMM and attention partitions change, the math must not).
TEST_F(EmbeddedModel, ThreadCountDoesNotChangeResults) {
  const ModelWeights weights = bind_model_weights(*config_, *store_);
  CpuBackendOptions one;
  one.n_threads = 1;
  auto single = create_cpu_backend(*config_, weights, one);
  const std::vector<int32_t> tokens = random_tokens(19, config_->vocab_size, 5);
  const Rows a = run_chunks(*single, params(4, 16), tokens, {12, 1, 6}, {2, 0});
  const Rows b = run_chunks(*backend_, params(4, 16), tokens, {12, 1, 6}, {2, 0});
  EXPECT_LE(max_abs_diff(a, b), 1e-5);
}

// ------------------------------------------------------------- tiny models

std::vector<test::TinyFlavour> flavours() {
  std::vector<test::TinyFlavour> f(5);
  f[0].name = "qwen3_qknorm_tied_gqa4";
  f[0].qk_norm = true;
  f[0].theta = 1e6;
  f[1].name = "qwen2_bias_untied_mha";
  f[1].bias = true;
  f[1].tied = false;
  f[1].n_kv_heads = 4;
  f[2].name = "llama_partial_rotary_gqa2";
  f[2].tied = false;
  f[2].n_kv_heads = 2;
  f[2].head_dim = 16;
  f[2].partial_rotary = 0.5;
  f[3].name = "everything_gqa4";
  f[3].qk_norm = true;
  f[3].bias = true;
  f[3].tied = false;
  f[3].n_heads = 8;
  f[3].n_kv_heads = 2;
  f[3].partial_rotary = 0.5;
  f[4].name = "mha_single_head";
  f[4].n_heads = 1;
  f[4].n_kv_heads = 1;
  f[4].head_dim = 32;
  return f;
}

Rows to_rows(const std::vector<std::vector<double>> &d) {
  Rows r;
  for (const auto &row : d) r.emplace_back(row.begin(), row.end());
  return r;
}

// Proves the whole forward (embedding, RMSNorm, q/k norm, biases, RoPE with
// partial rotary, GQA attention, SwiGLU, final norm, tied/untied head) and
// the KV layout: every flavour's logits, prefilled and decoded over shuffled
// pages, match a naive double-precision reference to 1e-4, and the K/V cache
// slots hold the reference's post-norm, post-RoPE K and V.
TEST(TinyModels, MatchNaiveReference) {
  for (const test::TinyFlavour &f : flavours()) {
    SCOPED_TRACE(f.name);
    test::TinyModel m = test::make_tiny_model(f, 1234);
    auto backend = create_cpu_backend(m.config, m.weights, CpuBackendOptions{});
    const std::vector<int32_t> tokens = random_tokens(13, m.config.vocab_size, 99);
    const test::ReferenceOutput ref = test::reference_forward(m.config, m.weights, tokens);

    const std::vector<int32_t> pages = shuffled_pages(4, 8, 17);
    const ContextParams p = params(8, 4);
    auto ctx = backend->create_context(p);
    Rows got;
    int32_t pos = 0;
    for (int32_t n : {6, 1, 1, 1, 4}) {
      ForwardBatch b;
      SeqRows s;
      s.tokens = tokens.data() + pos;
      s.n_tokens = n;
      s.start_pos = pos;
      s.page_table = pages.data();
      s.n_pages = 4;
      s.logits = SeqRows::Logits::kAll;
      b.seqs.push_back(s);
      const float *l = ctx->forward(b);
      for (int32_t r = 0; r < n; ++r)
        got.emplace_back(l + r * m.config.vocab_size, l + (r + 1) * m.config.vocab_size);
      pos += n;
    }
    EXPECT_LE(max_abs_diff(got, to_rows(ref.logits)), 1e-4);

    const auto &cpu = dynamic_cast<const CpuContext &>(*ctx);
    const int64_t kv = m.config.kv_dim();
    double kv_err = 0;
    for (int l = 0; l < m.config.n_layers; ++l) {
      for (int64_t t = 0; t < 13; ++t) {
        const int64_t slot = int64_t{pages[t / 4]} * 4 + t % 4;
        for (int64_t i = 0; i < kv; ++i) {
          kv_err = std::max(kv_err,
                            std::fabs(cpu.k_cache(l)[slot * kv + i] - ref.k_cache[l][t * kv + i]));
          kv_err = std::max(kv_err,
                            std::fabs(cpu.v_cache(l)[slot * kv + i] - ref.v_cache[l][t * kv + i]));
        }
      }
    }
    EXPECT_LE(kv_err, 1e-4);
  }
}

// Proves sparse drafting attention: rows attending to a per-layer selected set
// below `prefix` plus everything from `prefix` on match the reference with
// that visibility (and differ from full attention, so the set is honoured).
TEST(TinyModels, SparseAttentionMatchesReference) {
  test::TinyFlavour f = flavours()[3];
  test::TinyModel m = test::make_tiny_model(f, 77);
  auto backend = create_cpu_backend(m.config, m.weights, CpuBackendOptions{});
  const std::vector<int32_t> tokens = random_tokens(16, m.config.vocab_size, 5);
  const int32_t prefix = 10;
  // Layer 0 keeps positions {0, 3, 4, 8}, layer 1 keeps {2, 9}; stride 5.
  const std::vector<int32_t> positions = {0, 3, 4, 8, -1, 2, 9, -1, -1, -1};
  const std::vector<int32_t> counts = {4, 2};
  auto selected = [&](int layer, int64_t k) {
    for (int32_t j = 0; j < counts[layer]; ++j)
      if (positions[layer * 5 + j] == k) return true;
    return false;
  };
  // Rows 0..11 are prefilled with full attention; rows 12..15 draft sparsely.
  const test::Visibility vis = [&](int layer, int64_t q, int64_t k) {
    return q < 12 || k >= prefix || selected(layer, k);
  };
  const test::ReferenceOutput ref = test::reference_forward(m.config, m.weights, tokens, vis);
  const test::ReferenceOutput full = test::reference_forward(m.config, m.weights, tokens);

  const std::vector<int32_t> pages = {3, 0, 2, 1};
  auto ctx = backend->create_context(params(4, 4));
  SparseAttention sp;
  sp.prefix = prefix;
  sp.positions = positions.data();
  sp.counts = counts.data();
  sp.stride = 5;
  ForwardBatch prefill;
  SeqRows s;
  s.tokens = tokens.data();
  s.n_tokens = 12;
  s.page_table = pages.data();
  s.n_pages = 4;
  s.logits = SeqRows::Logits::kNone;
  prefill.seqs.push_back(s);
  ctx->forward(prefill);
  ForwardBatch draft;
  s.tokens = tokens.data() + 12;
  s.start_pos = 12;
  s.n_tokens = 4;
  s.logits = SeqRows::Logits::kAll;
  s.sparse = &sp;
  draft.seqs.push_back(s);
  const float *l = ctx->forward(draft);
  const int32_t V = m.config.vocab_size;
  Rows got, want, want_full;
  for (int32_t r = 0; r < 4; ++r) {
    got.emplace_back(l + r * V, l + (r + 1) * V);
    want.emplace_back(ref.logits[12 + r].begin(), ref.logits[12 + r].end());
    want_full.emplace_back(full.logits[12 + r].begin(), full.logits[12 + r].end());
  }
  EXPECT_LE(max_abs_diff(got, want), 1e-4);
  EXPECT_GT(max_abs_diff(got, want_full), 1e-3);
}

// Proves the verification score capture: for the listed rows, every layer's
// and head's scaled q.k over the candidates and the log-sum-exp over all
// attended keys equal the reference's.
TEST(TinyModels, ScoreCaptureMatchesReference) {
  test::TinyFlavour f = flavours()[0];
  test::TinyModel m = test::make_tiny_model(f, 31);
  auto backend = create_cpu_backend(m.config, m.weights, CpuBackendOptions{});
  const std::vector<int32_t> tokens = random_tokens(11, m.config.vocab_size, 8);
  const test::ReferenceOutput ref = test::reference_forward(m.config, m.weights, tokens);
  const std::vector<int32_t> pages = {1, 2, 0};
  auto ctx = backend->create_context(params(3, 4));
  SeqRows s;
  s.tokens = tokens.data();
  s.n_tokens = 7;
  s.page_table = pages.data();
  s.n_pages = 3;
  s.logits = SeqRows::Logits::kNone;
  ForwardBatch b1;
  b1.seqs.push_back(s);
  ctx->forward(b1);

  // Verify rows 7..10 (committed n = 8: row 0 of the pass is position 7).
  const int32_t n_cand = 8, H = m.config.n_heads, L = m.config.n_layers;
  const std::vector<int32_t> cap_rows = {0, 3};
  std::vector<float> logits(static_cast<size_t>(L * 2 * H * n_cand), -1.f), lse(L * 2 * H, -1.f);
  ScoreCapture cap;
  cap.n_candidates = n_cand;
  cap.rows = cap_rows.data();
  cap.n_rows = 2;
  cap.logits = logits.data();
  cap.lse = lse.data();
  s.tokens = tokens.data() + 7;
  s.start_pos = 7;
  s.n_tokens = 4;
  s.logits = SeqRows::Logits::kAll;
  s.capture = &cap;
  ForwardBatch b2;
  b2.seqs.push_back(s);
  ctx->forward(b2);
  double err = 0;
  for (int l = 0; l < L; ++l)
    for (int c = 0; c < 2; ++c) {
      const int64_t pos = 7 + cap_rows[c];
      for (int h = 0; h < H; ++h) {
        const int64_t at = (int64_t{l} * 2 + c) * H + h;
        err = std::max(err, std::fabs(lse[at] - ref.lse[l][pos][h]));
        for (int j = 0; j < n_cand; ++j)
          err = std::max(err, std::fabs(logits[at * n_cand + j] - ref.scaled_qk[l][pos][h][j]));
      }
    }
  EXPECT_LE(err, 1e-4);
}

// ------------------------------------------------------------- error paths

vegas_status status_of(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    EXPECT_GT(std::string(e.what()).size(), 10u);
    return e.status();
  }
  return VEGAS_OK;
}

// Proves bad batches are clear errors (never a crash or an out-of-bounds
// access) and that a rejected batch leaves the context usable.
TEST(CpuBackendErrors, BadBatches) {
  test::TinyModel m = test::make_tiny_model(flavours()[0], 5);
  auto backend = create_cpu_backend(m.config, m.weights, CpuBackendOptions{});
  auto ctx = backend->create_context(params(4, 4, 8));
  std::vector<int32_t> tokens = {1, 2, 3, 4, 5};
  std::vector<int32_t> pages = {0, 1};
  auto batch = [&](std::function<void(SeqRows &)> edit) {
    ForwardBatch b;
    SeqRows s;
    s.tokens = tokens.data();
    s.n_tokens = 5;
    s.page_table = pages.data();
    s.n_pages = 2;
    edit(s);
    b.seqs.push_back(s);
    return b;
  };
  auto forward = [&](const ForwardBatch &b) { return status_of([&] { ctx->forward(b); }); };

  EXPECT_EQ(forward(ForwardBatch{}), VEGAS_ERR_INVALID_ARGUMENT);
  tokens[2] = m.config.vocab_size;
  EXPECT_EQ(forward(batch([](SeqRows &) {})), VEGAS_ERR_TOKEN_OUT_OF_RANGE);
  tokens[2] = -1;
  EXPECT_EQ(forward(batch([](SeqRows &) {})), VEGAS_ERR_TOKEN_OUT_OF_RANGE);
  tokens[2] = 3;
  EXPECT_EQ(forward(batch([](SeqRows &s) { s.n_pages = 1; })), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(forward(batch([](SeqRows &s) { s.page_table = nullptr; })), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(forward(batch([](SeqRows &s) { s.tokens = nullptr; })), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(forward(batch([](SeqRows &s) { s.n_tokens = 0; })), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(forward(batch([](SeqRows &s) { s.start_pos = -1; })), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(forward(batch([](SeqRows &s) { s.start_pos = 12; })), VEGAS_ERR_INVALID_ARGUMENT);
  pages[1] = 4;  // outside the pool of 4 pages
  EXPECT_EQ(forward(batch([](SeqRows &) {})), VEGAS_ERR_INVALID_ARGUMENT);
  pages[1] = 1;
  pages[0] = -1;  // negative (the check compares unsigned)
  EXPECT_EQ(forward(batch([](SeqRows &) {})), VEGAS_ERR_INVALID_ARGUMENT);
  pages[0] = 0;
  {
    ForwardBatch two = batch([](SeqRows &) {});
    two.seqs.push_back(two.seqs[0]);  // 10 rows > max_rows 8
    EXPECT_EQ(forward(two), VEGAS_ERR_INVALID_ARGUMENT);
  }
  // Sparse sets that are not ascending or reach past the prefix.
  const std::vector<int32_t> sel = {2, 1}, counts = {2, 0};
  SparseAttention sp;
  sp.prefix = 3;
  sp.positions = sel.data();
  sp.counts = counts.data();
  sp.stride = 2;
  EXPECT_EQ(forward(batch([&](SeqRows &s) {
              s.start_pos = 3;
              s.n_tokens = 2;
              s.sparse = &sp;
            })),
            VEGAS_ERR_INVALID_ARGUMENT);
  // A captured row that cannot see all candidates.
  std::vector<float> out(64);
  const int32_t row0 = 0;
  ScoreCapture cap;
  cap.n_candidates = 4;
  cap.rows = &row0;
  cap.n_rows = 1;
  cap.logits = out.data();
  cap.lse = out.data();
  EXPECT_EQ(forward(batch([&](SeqRows &s) { s.capture = &cap; })), VEGAS_ERR_INVALID_ARGUMENT);

  // The context still works after the rejections.
  EXPECT_EQ(forward(batch([](SeqRows &) {})), VEGAS_OK);
}

// Proves bad context parameters and an impossible pool are errors, not
// crashes: a pool larger than the host's memory is OUT_OF_MEMORY.
TEST(CpuBackendErrors, BadContexts) {
  test::TinyFlavour f;
  f.name = "wide_kv";
  f.n_heads = 8;
  f.n_kv_heads = 8;
  f.head_dim = 64;  // kv_dim 512: 2^31 slots would need 16 TiB
  test::TinyModel m = test::make_tiny_model(f, 5);
  auto backend = create_cpu_backend(m.config, m.weights, CpuBackendOptions{});
  EXPECT_EQ(status_of([&] { backend->create_context(params(0, 16)); }), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([&] { backend->create_context(params(4, 0)); }), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([&] { backend->create_context(params(4, 16, 0)); }),
            VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([&] { backend->create_context(params(1 << 26, 16)); }),
            VEGAS_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(status_of([&] { backend->create_context(params(1 << 30, 16)); }),
            VEGAS_ERR_INVALID_ARGUMENT);  // more than 2^31 slots
}

// Proves bad models are errors naming the fault: a missing or mis-sized
// tensor (FORMAT), heads not divisible by KV heads (FORMAT), mlp_bias
// (UNSUPPORTED), a negative thread count, and cancellation by progress.
TEST(CpuBackendErrors, BadModels) {
  auto create = [](const test::TinyModel &m, CpuBackendOptions o = {}) {
    return status_of([&] { create_cpu_backend(m.config, m.weights, o); });
  };
  test::TinyModel m = test::make_tiny_model(flavours()[0], 5);
  {
    test::TinyModel bad = test::make_tiny_model(flavours()[0], 5);
    bad.weights.layers[1].k_norm = nullptr;
    EXPECT_EQ(create(bad), VEGAS_ERR_FORMAT);
  }
  {
    test::TinyModel bad = test::make_tiny_model(flavours()[0], 5);
    bad.weights.layers[0].wo = bad.weights.layers[0].wk;  // wrong size
    EXPECT_EQ(create(bad), VEGAS_ERR_FORMAT);
  }
  {
    test::TinyModel bad = test::make_tiny_model(flavours()[0], 5);
    bad.config.n_kv_heads = 3;
    EXPECT_EQ(create(bad), VEGAS_ERR_FORMAT);
  }
  {
    test::TinyModel bad = test::make_tiny_model(flavours()[0], 5);
    bad.config.mlp_bias = true;
    EXPECT_EQ(create(bad), VEGAS_ERR_UNSUPPORTED);
  }
  CpuBackendOptions negative;
  negative.n_threads = -2;
  EXPECT_EQ(create(m, negative), VEGAS_ERR_INVALID_ARGUMENT);
  CpuBackendOptions too_many;  // past kMaxCpuThreads: refused before OpenMP sees it
  too_many.n_threads = kMaxCpuThreads + 1;
  EXPECT_EQ(create(m, too_many), VEGAS_ERR_INVALID_ARGUMENT);

  std::vector<float> seen;
  CpuBackendOptions cancel;
  cancel.progress = [&](float p) {
    seen.push_back(p);
    return p < 0.5f;
  };
  EXPECT_EQ(create(m, cancel), VEGAS_ERR_CANCELLED);
  ASSERT_FALSE(seen.empty());
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_GE(seen.back(), 0.5f);

  seen.clear();
  CpuBackendOptions watch;
  watch.progress = [&](float p) {
    seen.push_back(p);
    return true;
  };
  EXPECT_EQ(create(m, watch), VEGAS_OK);
  ASSERT_FALSE(seen.empty());
  EXPECT_FLOAT_EQ(seen.back(), 1.f);
}

}  // namespace
}  // namespace vegas
