// The CUDA backend against the CPU reference backend on the embedded model
// (vegas-code-22m): logits of prefill, chunked prefill, decode steps (eager and
// replayed CUDA graphs), mixed batches and multi-row causal (verification)
// rows agree to relative L2 <= 1e-2 (bf16 weights are shared by both; the CUDA
// side keeps activations in bf16 with f32 accumulation, the CPU side in f32),
// and device greedy sampling returns the argmax of the CUDA logits.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "../unit/support/model_dir.h"
#include "../unit/support/tiny_model.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_context.h"
#include "common/bf16.h"
#include "gpu_test_util.h"
#include "kv/kv_pool.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/weight_store.h"
#include "sampling/sampling.h"

namespace vegas::test {
namespace {

constexpr double kTolerance = 1e-2;

class CudaVsCpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!have_gpu()) return;
    config_ = new ModelConfig(load_model_config(embedded_model_dir() + "/config.json"));
    store_ = WeightStore::open(embedded_model_dir()).release();
    const ModelWeights weights = bind_model_weights(*config_, *store_);
    cpu_ = create_cpu_backend(*config_, weights, CpuBackendOptions{}).release();
    cuda_ = create_cuda_backend(*config_, weights, CudaBackendOptions{}).release();
  }
  static void TearDownTestSuite() {
    delete cuda_;
    delete cpu_;
    delete store_;
    delete config_;
  }
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    ContextParams p;
    p.num_pages = 512;
    p.page_size = 16;
    p.max_rows = 1536;  // DecodeStepsEagerAndGraphs prefills 1108 rows in one call
    cpu_ctx_ = cpu_->create_context(p);
    cuda_ctx_ = cuda_->create_context(p);
    pool_ = std::make_unique<KvPool>(p.num_pages, p.page_size);
  }

  // One sequence's state shared by both backends (same pages on both).
  struct Seq {
    std::vector<int32_t> tokens;  // everything fed so far
    std::vector<int32_t> table;
  };

  std::vector<int32_t> random_tokens(int n) {
    std::uniform_int_distribution<int32_t> u(1, config_->vocab_size - 1);
    std::vector<int32_t> t(n);
    for (auto &x : t) x = u(rng_);
    return t;
  }

  // Feeds `new_tokens[i]` to sequence i on both backends in one batch and
  // compares the logits they return.
  void step(std::vector<Seq *> seqs, const std::vector<std::vector<int32_t>> &new_tokens,
            const std::vector<SeqRows::Logits> &modes, const char *what) {
    ForwardBatch b;
    for (size_t i = 0; i < seqs.size(); ++i) {
      Seq &s = *seqs[i];
      SeqRows r;
      r.start_pos = static_cast<int32_t>(s.tokens.size());
      s.tokens.insert(s.tokens.end(), new_tokens[i].begin(), new_tokens[i].end());
      pool_->reserve(s.table, static_cast<int64_t>(s.tokens.size()));
      r.tokens = s.tokens.data() + r.start_pos;
      r.n_tokens = static_cast<int32_t>(new_tokens[i].size());
      r.page_table = s.table.data();
      r.n_pages = static_cast<int32_t>(s.table.size());
      r.logits = modes[i];
      b.seqs.push_back(r);
    }
    const size_t n = size_t(b.logit_rows()) * config_->vocab_size;
    const float *ref = cpu_ctx_->forward(b);
    const std::vector<double> want(ref, ref + n);
    const float *got = cuda_ctx_->forward(b);
    const std::vector<float> have(got, got + n);
    EXPECT_LT(rel_l2(have, want), kTolerance) << what;
    last_logits_ = have;
    last_batch_ = b;
  }

  // Whether VEGAS_CUDA_CANDIDATES=0 turned the device candidates off.
  static bool device_candidates_off() {
    const char *v = std::getenv("VEGAS_CUDA_CANDIDATES");
    return v != nullptr && std::string(v) == "0";
  }

  // Prefilled sequences with these prompt lengths, and pointers to them.
  void prefill(std::vector<Seq> *seqs, std::vector<Seq *> *ptrs, const std::vector<int> &lengths) {
    seqs->assign(lengths.size(), Seq{});
    ptrs->clear();
    std::vector<std::vector<int32_t>> prompts;
    for (size_t i = 0; i < lengths.size(); ++i) {
      ptrs->push_back(&(*seqs)[i]);
      prompts.push_back(random_tokens(lengths[i]));
    }
    step(*ptrs, prompts, std::vector<SeqRows::Logits>(lengths.size(), SeqRows::Logits::kLast),
         "prefill");
  }

  // Rows `tokens[0..n)` of `s` right after everything it was fed (not fed to
  // it here: draft and verify rows), over its whole page table.
  static SeqRows rows_after(const Seq &s, const int32_t *tokens, int32_t n,
                            SeqRows::Logits logits = SeqRows::Logits::kLast) {
    SeqRows r;
    r.tokens = tokens;
    r.n_tokens = n;
    r.start_pos = static_cast<int32_t>(s.tokens.size());
    r.page_table = s.table.data();
    r.n_pages = static_cast<int32_t>(s.table.size());
    r.logits = logits;
    return r;
  }

  // A batch of `s` alone: all its tokens from position 0, its whole page table.
  static ForwardBatch alone(const Seq &s) {
    SeqRows r;
    r.tokens = s.tokens.data();
    r.n_tokens = static_cast<int32_t>(s.tokens.size());
    r.page_table = s.table.data();
    r.n_pages = static_cast<int32_t>(s.table.size());
    ForwardBatch b;
    b.seqs.push_back(r);
    return b;
  }

  static ModelConfig *config_;
  static WeightStore *store_;
  static BackendModel *cpu_;
  static BackendModel *cuda_;
  std::unique_ptr<BackendContext> cpu_ctx_, cuda_ctx_;
  std::unique_ptr<KvPool> pool_;
  std::mt19937 rng_{7};
  std::vector<float> last_logits_;
  ForwardBatch last_batch_;
};

ModelConfig *CudaVsCpu::config_ = nullptr;
WeightStore *CudaVsCpu::store_ = nullptr;
BackendModel *CudaVsCpu::cpu_ = nullptr;
BackendModel *CudaVsCpu::cuda_ = nullptr;

using L = SeqRows::Logits;

// Prefill chunks that capture scores (the last prompt row, DESIGN §3 step 1)
// match the CPU backend in logits and captured logits and lse: a chunk whose
// captured rows are its last (staged as a prefill front and a verify tail,
// capture_split), one over a cached prefix capturing its last two rows, and
// one whose captured rows are spread (staged whole, on the paged kernel), in
// one batch. It fails if the split drops the tail's K/V or captures the
// wrong rows (each row's lse is its own).
TEST_F(CudaVsCpu, PrefillChunksCaptureScores) {
  Seq a, b, c;
  step({&b}, {random_tokens(130)}, {L::kLast}, "prefix of b");
  struct Want {
    Seq *seq;
    std::vector<int32_t> rows;
    int32_t n_tokens;
  };
  const std::vector<Want> wants = {{&a, {299}, 300}, {&b, {258, 259}, 260}, {&c, {100, 199}, 200}};
  ForwardBatch batch;
  std::vector<ScoreCapture> cpu_caps(wants.size()), cuda_caps(wants.size());
  std::vector<std::vector<float>> logit_store(2 * wants.size()), lse_store(2 * wants.size());
  for (size_t i = 0; i < wants.size(); ++i) {
    Seq &s = *wants[i].seq;
    SeqRows r;
    r.start_pos = static_cast<int32_t>(s.tokens.size());
    const auto t = random_tokens(wants[i].n_tokens);
    s.tokens.insert(s.tokens.end(), t.begin(), t.end());
    pool_->reserve(s.table, static_cast<int64_t>(s.tokens.size()));
    r.tokens = s.tokens.data() + r.start_pos;
    r.n_tokens = wants[i].n_tokens;
    r.page_table = s.table.data();
    r.n_pages = static_cast<int32_t>(s.table.size());
    r.logits = L::kLast;
    // Candidates every captured row sees (as a round's verify rows do).
    const int32_t n_cand = r.start_pos + wants[i].rows.front() + 1;
    const size_t lines = size_t(config_->n_layers) * wants[i].rows.size() * config_->n_heads;
    for (int backend = 0; backend < 2; ++backend) {
      ScoreCapture &cap = backend == 0 ? cpu_caps[i] : cuda_caps[i];
      logit_store[2 * i + backend].assign(lines * n_cand, 0.0f);
      lse_store[2 * i + backend].assign(lines, 0.0f);
      cap.n_candidates = n_cand;
      cap.rows = wants[i].rows.data();
      cap.n_rows = static_cast<int32_t>(wants[i].rows.size());
      cap.logits = logit_store[2 * i + backend].data();
      cap.lse = lse_store[2 * i + backend].data();
    }
    batch.seqs.push_back(r);
  }
  for (size_t i = 0; i < wants.size(); ++i) batch.seqs[i].capture = &cpu_caps[i];
  const size_t n = size_t(batch.logit_rows()) * config_->vocab_size;
  const float *ref = cpu_ctx_->forward(batch);
  const std::vector<double> want(ref, ref + n);
  for (size_t i = 0; i < wants.size(); ++i) batch.seqs[i].capture = &cuda_caps[i];
  const float *got = cuda_ctx_->forward(batch);
  EXPECT_LT(rel_l2(std::vector<float>(got, got + n), want), kTolerance) << "logits";
  for (size_t i = 0; i < wants.size(); ++i) {
    const std::vector<float> &cpu_log = logit_store[2 * i], &cpu_lse = lse_store[2 * i];
    EXPECT_LT(rel_l2(logit_store[2 * i + 1], std::vector<double>(cpu_log.begin(), cpu_log.end())),
              kTolerance)
        << "captured logits of sequence " << i;
    EXPECT_LT(rel_l2(lse_store[2 * i + 1], std::vector<double>(cpu_lse.begin(), cpu_lse.end())),
              kTolerance)
        << "captured lse of sequence " << i;
  }
}

// A prompt prefilled in one call (all rows' logits), then in chunks over the
// cached prefix.
TEST_F(CudaVsCpu, PrefillAndChunkedPrefill) {
  Seq a, b;
  step({&a}, {random_tokens(300)}, {L::kAll}, "prefill 300 rows, all logits");
  const auto t = random_tokens(400);
  step({&b}, {{t.begin(), t.begin() + 130}}, {L::kLast}, "chunk 1");
  step({&b}, {{t.begin() + 130, t.begin() + 390}}, {L::kAll}, "chunk 2 over a 130 prefix");
  step({&b}, {{t.begin() + 390, t.end()}}, {L::kLast}, "chunk 3");
}

// Decode steps for a batch of sequences of different lengths: the first step
// of a shape runs eagerly, the second is captured, later ones replay graphs.
TEST_F(CudaVsCpu, DecodeStepsEagerAndGraphs) {
  std::vector<Seq> seqs(5);
  std::vector<Seq *> ptrs;
  for (auto &s : seqs) ptrs.push_back(&s);
  step(ptrs,
       {random_tokens(10), random_tokens(333), random_tokens(1), random_tokens(64),
        random_tokens(700)},
       std::vector<L>(5, L::kLast), "prefill of 5");
  for (int i = 0; i < 6; ++i) {
    std::vector<std::vector<int32_t>> next;
    for (int k = 0; k < 5; ++k) next.push_back(random_tokens(1));
    step(ptrs, next, std::vector<L>(5, L::kLast), "decode step");
  }
  auto *ctx = dynamic_cast<cuda::CudaContext *>(cuda_ctx_.get());
  ASSERT_NE(ctx, nullptr);
  EXPECT_GE(ctx->graphs_captured(), 1u);
}

// Whether environment variable `name` is "1" (an opted-in variant).
bool opted_in(const char *name) {
  const char *v = std::getenv(name);
  return v != nullptr && std::string(v) == "1";
}

// Verification passes without score capture (every row's logits, a few rows
// a sequence, some of one row): each pass's logits against the CPU backend.
// With VEGAS_CUDA_VERIFY_GRAPHS=1 they replay graphs, padded to 8 sequences
// and 32 rows, across row counts that share a graph (the first run of a shape
// is eager, the second captured, later ones replay), and a graph of more rows
// a sequence next to them.
TEST_F(CudaVsCpu, VerificationPassesEagerAndGraphs) {
  std::vector<Seq> seqs;
  std::vector<Seq *> ptrs;
  prefill(&seqs, &ptrs, {40, 300, 7, 129, 1000});
  auto *ctx = dynamic_cast<cuda::CudaContext *>(cuda_ctx_.get());
  ASSERT_NE(ctx, nullptr);
  const size_t before = ctx->graphs_captured();
  const std::vector<std::vector<int>> shapes = {
      {7, 1, 4, 7, 3}, {7, 2, 4, 7, 3}, {6, 1, 7, 7, 1}, {7, 1, 4, 7, 3}, {11, 1, 11, 2, 5}};
  for (int round = 0; round < 3; ++round)
    for (const std::vector<int> &rows : shapes) {
      std::vector<std::vector<int32_t>> next;
      for (int r : rows) next.push_back(random_tokens(r));
      step(ptrs, next, std::vector<L>(rows.size(), L::kAll), "verification pass");
    }
  if (opted_in("VEGAS_CUDA_VERIFY_GRAPHS"))
    EXPECT_GE(ctx->graphs_captured(), before + 2) << "both shapes replay graphs";
  else
    EXPECT_EQ(ctx->graphs_captured(), before) << "verification passes run eagerly by default";
}

// Verification passes that capture scores (a round that selects: rows 0 and
// the last of each sequence, over the candidates before the round): logits,
// captured logits and lse against the CPU backend, pass after pass. With
// VEGAS_CUDA_VERIFY_GRAPHS=1 and VEGAS_CUDA_CAPTURE_GRAPHS=1 they replay
// graphs whose capture slots and score strides are padded: the row counts
// here share graphs, and the contexts grow through them.
TEST_F(CudaVsCpu, CapturedVerificationPassesEagerAndGraphs) {
  std::vector<Seq> seqs;
  std::vector<Seq *> ptrs;
  prefill(&seqs, &ptrs, {40, 300, 129, 1000});
  auto *ctx = dynamic_cast<cuda::CudaContext *>(cuda_ctx_.get());
  ASSERT_NE(ctx, nullptr);
  const size_t before = ctx->graphs_captured();
  const std::vector<std::vector<int>> shapes = {{7, 7, 4, 7}, {7, 6, 4, 7}, {7, 7, 1, 2}};
  for (int round = 0; round < 3; ++round)
    for (const std::vector<int> &n_rows : shapes) {
      ForwardBatch batch;
      std::vector<std::vector<int32_t>> rows(seqs.size());
      std::vector<ScoreCapture> caps(2 * seqs.size());
      std::vector<std::vector<float>> logit_store(caps.size()), lse_store(caps.size());
      for (size_t i = 0; i < seqs.size(); ++i) {
        Seq &sq = seqs[i];
        SeqRows r;
        r.start_pos = static_cast<int32_t>(sq.tokens.size());
        const auto t = random_tokens(n_rows[i]);
        sq.tokens.insert(sq.tokens.end(), t.begin(), t.end());
        pool_->reserve(sq.table, static_cast<int64_t>(sq.tokens.size()));
        r.tokens = sq.tokens.data() + r.start_pos;
        r.n_tokens = n_rows[i];
        r.page_table = sq.table.data();
        r.n_pages = static_cast<int32_t>(sq.table.size());
        r.logits = L::kAll;
        rows[i] = n_rows[i] > 1 ? std::vector<int32_t>{0, n_rows[i] - 1} : std::vector<int32_t>{0};
        const size_t lines = size_t(config_->n_layers) * rows[i].size() * config_->n_heads;
        for (int backend = 0; backend < 2; ++backend) {
          const size_t k = 2 * i + backend;
          logit_store[k].assign(lines * r.start_pos, 0.0f);
          lse_store[k].assign(lines, 0.0f);
          caps[k].n_candidates = r.start_pos;
          caps[k].rows = rows[i].data();
          caps[k].n_rows = static_cast<int32_t>(rows[i].size());
          caps[k].logits = logit_store[k].data();
          caps[k].lse = lse_store[k].data();
        }
        batch.seqs.push_back(r);
      }
      for (size_t i = 0; i < seqs.size(); ++i) batch.seqs[i].capture = &caps[2 * i];
      const size_t n = size_t(batch.logit_rows()) * config_->vocab_size;
      const float *ref = cpu_ctx_->forward(batch);
      const std::vector<double> want(ref, ref + n);
      for (size_t i = 0; i < seqs.size(); ++i) batch.seqs[i].capture = &caps[2 * i + 1];
      const float *got = cuda_ctx_->forward(batch);
      EXPECT_LT(rel_l2(std::vector<float>(got, got + n), want), kTolerance) << "logits";
      for (size_t i = 0; i < seqs.size(); ++i) {
        const std::vector<float> &cpu_log = logit_store[2 * i], &cpu_lse = lse_store[2 * i];
        EXPECT_LT(
            rel_l2(logit_store[2 * i + 1], std::vector<double>(cpu_log.begin(), cpu_log.end())),
            kTolerance)
            << "captured logits of sequence " << i << ", round " << round;
        EXPECT_LT(rel_l2(lse_store[2 * i + 1], std::vector<double>(cpu_lse.begin(), cpu_lse.end())),
                  kTolerance)
            << "captured lse of sequence " << i << ", round " << round;
      }
    }
  if (opted_in("VEGAS_CUDA_VERIFY_GRAPHS") && opted_in("VEGAS_CUDA_CAPTURE_GRAPHS"))
    EXPECT_GE(ctx->graphs_captured(), before + 1) << "captured passes replay graphs";
  else
    EXPECT_EQ(ctx->graphs_captured(), before) << "captured passes run eagerly by default";
}

// The device keeps the page tables it was sent and a step uploads only what
// changed: sequences that change places, leave the batch or come back must
// still read their own pages (each step against the CPU backend).
TEST_F(CudaVsCpu, BatchesThatReorderAndDropSequences) {
  Seq a, b, c;
  step({&a, &b, &c}, {random_tokens(40), random_tokens(90), random_tokens(15)},
       std::vector<L>(3, L::kLast), "prefill of 3");
  step({&a, &b, &c}, {random_tokens(1), random_tokens(1), random_tokens(1)},
       std::vector<L>(3, L::kLast), "decode a, b, c");
  step({&a, &b, &c}, {random_tokens(1), random_tokens(1), random_tokens(1)},
       std::vector<L>(3, L::kLast), "same tables again");
  step({&c, &a, &b}, {random_tokens(1), random_tokens(1), random_tokens(1)},
       std::vector<L>(3, L::kLast), "decode c, a, b");
  step({&b}, {random_tokens(1)}, {L::kLast}, "decode b alone");
  step({&a, &b, &c}, {random_tokens(1), random_tokens(1), random_tokens(1)},
       std::vector<L>(3, L::kLast), "decode a, b, c again");
}

// A table entry that no step needed yet is checked when a step first needs
// it, even though the table is otherwise the one the device already holds.
TEST_F(CudaVsCpu, EntryNeededLaterIsChecked) {
  Seq a;
  a.tokens = random_tokens(16);
  pool_->reserve(a.table, 16);  // one page
  a.table.push_back(-7);        // not needed by positions 0..15
  ForwardBatch b = alone(a);
  ASSERT_NO_THROW(cuda_ctx_->forward(b));
  const int32_t next = 1;
  b.seqs[0].tokens = &next;
  b.seqs[0].n_tokens = 1;
  b.seqs[0].start_pos = 16;      // needs the second entry
  for (int i = 0; i < 2; ++i) {  // eager, then the graph path
    try {
      cuda_ctx_->forward(b);
      ADD_FAILURE() << "page -7 accepted";
    } catch (const Error &e) {
      EXPECT_EQ(e.status(), VEGAS_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find("is page -7"), std::string::npos) << e.what();
    }
  }
}

// Mixed batch: a prefill chunk, decode rows and verification rows together.
TEST_F(CudaVsCpu, MixedBatchWithVerificationRows) {
  Seq a, b, c;
  step({&a, &b, &c}, {random_tokens(50), random_tokens(200), random_tokens(17)},
       {L::kLast, L::kLast, L::kNone}, "prefill of 3");
  step({&a, &b, &c}, {random_tokens(5), random_tokens(1), random_tokens(120)},
       {L::kAll, L::kLast, L::kAll}, "verify 5 rows + decode + prefill chunk");
  step({&a, &b}, {random_tokens(4), random_tokens(4)}, {L::kAll, L::kAll}, "two verify blocks");
}

// Device greedy sampling gives the argmax of the logits, both eagerly and
// through the graph path.
TEST_F(CudaVsCpu, DeviceGreedySampling) {
  std::vector<Seq> seqs(3);
  std::vector<Seq *> ptrs;
  for (auto &s : seqs) ptrs.push_back(&s);
  step(ptrs, {random_tokens(40), random_tokens(90), random_tokens(3)}, std::vector<L>(3, L::kLast),
       "prefill");
  SamplingParams greedy;
  std::vector<RowSampling> rows(3, RowSampling{&greedy, 0});
  for (int i = 0; i < 4; ++i) {
    std::vector<std::vector<int32_t>> next = {random_tokens(1), random_tokens(1), random_tokens(1)};
    step(ptrs, next, std::vector<L>(3, L::kLast), "decode");
    std::vector<int32_t> want(3);
    for (int r = 0; r < 3; ++r)
      want[r] = argmax(last_logits_.data() + size_t(r) * config_->vocab_size, config_->vocab_size);
    // Same rows again (the K/V they write is identical), now sampled on the device.
    std::vector<int32_t> got(3, -1);
    ASSERT_TRUE(cuda_ctx_->forward_sample(last_batch_, rows.data(), got.data()));
    EXPECT_EQ(got, want);
  }
  // A sampled row between greedy ones: the host's token for the same logits
  // and Rng draw (kernels/sampling.cuh; test_cuda_sampling covers the rules).
  SamplingParams hot;
  hot.temperature = 0.7f;
  hot.top_k = 40;
  hot.top_p = 0.95f;
  hot.seed = 99;
  rows[1] = RowSampling{&hot, 12};
  std::vector<int32_t> got(3, -1);
  ASSERT_TRUE(cuda_ctx_->forward_sample(last_batch_, rows.data(), got.data()));
  const int32_t vocab = config_->vocab_size;
  TokenDistribution dist;
  build_distribution(last_logits_.data() + vocab, vocab, hot, {}, &dist);
  Rng rng(hot.seed);
  rng.set_counter(12);
  EXPECT_EQ(got[1], sample_from(dist, rng.uniform()));
  EXPECT_EQ(got[0], argmax(last_logits_.data(), vocab));
  EXPECT_EQ(got[2], argmax(last_logits_.data() + 2 * size_t(vocab), vocab));
  // Penalties need the history: without it forward_sample declines, doing
  // nothing; with it, the host's token for build_distribution(history).
  hot.repetition_penalty = 1.3f;
  hot.frequency_penalty = 0.2f;
  std::vector<int32_t> none(3, -1);
  EXPECT_FALSE(cuda_ctx_->forward_sample(last_batch_, rows.data(), none.data()));
  EXPECT_EQ(none, std::vector<int32_t>(3, -1));
  const std::vector<int32_t> &history = seqs[1].tokens;
  rows[1].history = history.data();
  rows[1].history_len = static_cast<int32_t>(history.size());
  ASSERT_TRUE(cuda_ctx_->forward_sample(last_batch_, rows.data(), got.data()));
  build_distribution(last_logits_.data() + vocab, vocab, hot, history, &dist);
  rng.set_counter(12);
  EXPECT_EQ(got[1], sample_from(dist, rng.uniform()));
  EXPECT_EQ(got[0], argmax(last_logits_.data(), vocab));
}

// forward_candidates returns, for a decode step (graph path) and for
// verification rows (eager), exactly extract_candidates of the logits the
// same batch gives through forward() (the device path is on unless
// VEGAS_CUDA_CANDIDATES=0, which the test then skips).
TEST_F(CudaVsCpu, DeviceLogitCandidatesMatchHost) {
  if (device_candidates_off()) GTEST_SKIP() << "VEGAS_CUDA_CANDIDATES=0: picked on the host";
  std::vector<Seq> seqs;
  std::vector<Seq *> ptrs;
  prefill(&seqs, &ptrs, {40, 90, 3});
  const int32_t vocab = config_->vocab_size;
  for (const L mode : {L::kLast, L::kAll}) {
    const int n_new = mode == L::kLast ? 1 : 4;
    step(ptrs, {random_tokens(n_new), random_tokens(n_new), random_tokens(n_new)},
         std::vector<L>(3, mode), "decode or verify");
    const int32_t rows = last_batch_.logit_rows();
    std::vector<int32_t> k(static_cast<size_t>(rows));
    for (int32_t i = 0; i < rows; ++i)
      k[i] = i % 3 == 0 ? 1 : (i % 3 == 1 ? 20 : kMaxCandidateTopK);
    // Same rows again (the K/V they write is identical): logits, then candidates.
    const float *logits = cuda_ctx_->forward(last_batch_);
    const std::vector<float> whole(logits, logits + size_t(rows) * vocab);
    std::vector<LogitCandidates> got;
    ASSERT_TRUE(cuda_ctx_->forward_candidates(last_batch_, k.data(), &got));
    ASSERT_EQ(got.size(), size_t(rows));
    for (int32_t i = 0; i < rows; ++i) {
      LogitCandidates want;
      extract_candidates(whole.data() + size_t(i) * vocab, vocab, k[i], &want);
      EXPECT_EQ(got[i].ids, want.ids) << "row " << i;
      EXPECT_EQ(got[i].logits, want.logits) << "row " << i;
    }
  }
}

// A bad batch is an error, not a fault on the device.
// forward_draft_chain (a round's draft passes, each fed the previous pass's
// draws on the device) gives, pass for pass, the tokens forward_sample and the
// candidates forward_candidates give when the host feeds the same tokens one
// pass at a time: greedy and sampled rules (rng counter + pass) in one batch.
// It fails if a pass reads the wrong token, position or counter.
TEST_F(CudaVsCpu, DraftChainMatchesPassByPass) {
  if (device_candidates_off()) GTEST_SKIP() << "VEGAS_CUDA_CANDIDATES=0: no chain";
  std::vector<Seq> seqs;
  std::vector<Seq *> ptrs;
  prefill(&seqs, &ptrs, {50, 200, 7});
  const int32_t steps = 5, n = 3;
  std::vector<SamplingParams> rules(3);
  rules[1].temperature = 0.8f;
  rules[1].top_k = 20;
  rules[1].seed = 5;
  rules[2].temperature = 0.6f;
  rules[2].top_k = 50;
  rules[2].top_p = 0.9f;
  rules[2].seed = 9;
  std::vector<RowSampling> rows(3);
  const std::vector<int32_t> k = {1, 20, 50};
  std::vector<int32_t> first_tokens(3);
  ForwardBatch first;
  for (int32_t i = 0; i < n; ++i) {
    Seq &s = seqs[i];
    pool_->reserve(s.table, static_cast<int64_t>(s.tokens.size()) + steps);
    first_tokens[i] = s.tokens.back();
    first.seqs.push_back(rows_after(s, &first_tokens[i], 1));
    rows[i].params = &rules[i];
    rows[i].rng_counter = 100 + i;
  }
  std::vector<int32_t> chain_tokens(size_t(steps) * n);
  std::vector<LogitCandidates> chain_cands;
  ASSERT_TRUE(cuda_ctx_->forward_draft_chain(first, steps, rows.data(), k.data(),
                                             chain_tokens.data(), &chain_cands));
  ASSERT_EQ(chain_cands.size(), size_t(steps) * n);
  ForwardBatch pass = first;
  std::vector<int32_t> fed = first_tokens, got(3);
  for (int32_t j = 0; j < steps; ++j) {
    std::vector<RowSampling> pass_rows = rows;
    for (int32_t i = 0; i < n; ++i) {
      pass.seqs[i].start_pos = first.seqs[i].start_pos + j;
      pass.seqs[i].tokens = &fed[i];
      if (!rules[i].greedy()) pass_rows[i].rng_counter += j;
    }
    std::vector<LogitCandidates> cands;
    ASSERT_TRUE(cuda_ctx_->forward_candidates(pass, k.data(), &cands));
    ASSERT_TRUE(cuda_ctx_->forward_sample(pass, pass_rows.data(), got.data()));
    for (int32_t i = 0; i < n; ++i) {
      EXPECT_EQ(got[i], chain_tokens[size_t(j) * n + i]) << "pass " << j << " row " << i;
      EXPECT_EQ(cands[i].ids, chain_cands[size_t(j) * n + i].ids) << "pass " << j << " row " << i;
      EXPECT_EQ(cands[i].logits, chain_cands[size_t(j) * n + i].logits)
          << "pass " << j << " row " << i;
      fed[i] = chain_tokens[size_t(j) * n + i];
    }
  }
}

// A verify pass enqueued behind a begun chain, its draft rows' tokens fed
// from the chain's draws on the device (begin_candidates' `fed`), gives the
// candidates of the same pass with those tokens staged by the host. Sequence
// 1 verifies only its last token (gamma 0: not in the chain), sequence 2
// fewer rows than the chain drew for it; the sequences sit in another order
// than the chain's, so the verify pass rewrites the staged page tables that
// the chain's first pass uploads.
TEST_F(CudaVsCpu, VerifyFedFromChainMatchesHostTokens) {
  if (device_candidates_off()) GTEST_SKIP() << "VEGAS_CUDA_CANDIDATES=0: no chain";
  std::vector<Seq> seqs;
  std::vector<Seq *> ptrs;
  prefill(&seqs, &ptrs, {300, 40, 900});
  const int32_t steps = 4;
  const std::vector<int32_t> chained = {0, 2}, gamma = {4, 0, 2};
  SamplingParams sampled;
  sampled.temperature = 0.7f;
  sampled.top_k = 20;
  sampled.seed = 3;
  std::vector<RowSampling> rows(2, RowSampling{&sampled, 7});
  const std::vector<int32_t> k(2, 20);
  std::vector<int32_t> first_tokens;
  for (int32_t i : chained) first_tokens.push_back(seqs[i].tokens.back());
  for (Seq &s : seqs) pool_->reserve(s.table, static_cast<int64_t>(s.tokens.size()) + steps + 1);
  ForwardBatch first;
  for (size_t c = 0; c < chained.size(); ++c)
    first.seqs.push_back(rows_after(seqs[chained[c]], &first_tokens[c], 1));
  // Verify order: sequences 2, 1, 0.
  const std::vector<int32_t> order = {2, 1, 0};
  std::vector<std::vector<int32_t>> tokens(3);
  std::vector<int32_t> fed;
  ForwardBatch verify;
  for (int32_t i : order) {
    Seq &s = seqs[i];
    tokens[i].assign(static_cast<size_t>(gamma[i]) + 1, 0);
    tokens[i][0] = s.tokens.back();
    fed.push_back(-1);
    const int32_t c = i == 0 ? 0 : 1;  // its index in the chain
    for (int32_t j = 0; j < gamma[i]; ++j) fed.push_back(j * 2 + c);
    verify.seqs.push_back(rows_after(s, tokens[i].data(), gamma[i] + 1, SeqRows::Logits::kAll));
  }
  const std::vector<int32_t> vk(static_cast<size_t>(verify.total_rows()), 20);
  ASSERT_TRUE(cuda_ctx_->begin_draft_chain(first, steps, rows.data(), k.data()));
  ASSERT_TRUE(cuda_ctx_->begin_candidates(verify, vk.data(), fed.data()));
  std::vector<int32_t> draws(size_t(steps) * 2);
  std::vector<LogitCandidates> chain_cands, fed_cands, host_cands;
  ASSERT_TRUE(cuda_ctx_->end_draft_chain(draws.data(), &chain_cands));
  cuda_ctx_->end_candidates(&fed_cands);
  // The same pass with the draws staged by the host.
  for (int32_t i : order)
    for (int32_t j = 0; j < gamma[i]; ++j)
      tokens[i][static_cast<size_t>(j) + 1] = draws[size_t(j) * 2 + (i == 0 ? 0 : 1)];
  ASSERT_TRUE(cuda_ctx_->forward_candidates(verify, vk.data(), &host_cands));
  ASSERT_EQ(fed_cands.size(), host_cands.size());
  for (size_t r = 0; r < host_cands.size(); ++r) {
    EXPECT_EQ(fed_cands[r].ids, host_cands[r].ids) << "verify row " << r;
    EXPECT_EQ(fed_cands[r].logits, host_cands[r].logits) << "verify row " << r;
  }
  // A draw index past the chain is refused before anything runs.
  fed[1] = steps * 2;
  EXPECT_THROW(cuda_ctx_->begin_candidates(verify, vk.data(), fed.data()), Error);
}

// Proves one-row decode steps of few (sequence, KV head) pairs at head_dim
// 128, which take the CUDA-core decode kernel's wide blocks and count their
// resident blocks in their splits (CudaContext::wide_decode), match the CPU
// backend: one and four sequences, contexts from 40 to ~2,100 keys (one to
// many splits), GQA groups of 4 (8 heads over 2) and of 7 (28 over 4, as
// Qwen2.5-7B). The random model's weights are bf16 values, so both backends
// read the same ones.
void few_pairs_match_cpu(int32_t n_heads, int32_t n_kv_heads) {
  TinyFlavour f;
  f.name = "hd128";
  f.n_heads = n_heads;
  f.n_kv_heads = n_kv_heads;
  f.head_dim = 128;
  f.qk_norm = true;
  f.tied = false;
  f.hidden = 1024;
  f.intermediate = 2048;
  f.vocab = 1024;
  TinyModel m = make_tiny_model(f, 3);
  // Matrices scaled to the tiny model's fan-in of 32, so that activations
  // stay near one as in a trained model (unscaled, the residual grows into
  // the hundreds and bf16 activations alone move the logits ~1%).
  for (const TensorView &t : m.views) {
    if (t.shape.size() != 2 || t.name == "model.embed_tokens.weight") continue;
    const float scale = std::sqrt(32.0f / static_cast<float>(t.shape[1]));
    float *x = const_cast<float *>(static_cast<const float *>(t.data));
    for (int64_t i = 0; i < t.numel(); ++i) x[i] *= scale;
  }
  for (std::vector<float> &v : m.data)
    for (float &x : v) x = bf16_to_f32(f32_to_bf16(x));
  auto cpu = create_cpu_backend(m.config, m.weights, CpuBackendOptions{});
  auto cuda = create_cuda_backend(m.config, m.weights, CudaBackendOptions{});
  std::mt19937 rng(9);
  std::uniform_int_distribution<int32_t> tok(1, f.vocab - 1);
  double worst = 0;
  for (const std::vector<int> &lengths :
       std::vector<std::vector<int>>{{1100}, {40, 500, 1300, 2100}}) {
    ContextParams p;
    p.num_pages = 600;
    p.page_size = 16;
    p.max_rows = 4400;
    auto cpu_ctx = cpu->create_context(p);
    auto cuda_ctx = cuda->create_context(p);
    KvPool pool(p.num_pages, p.page_size);
    std::vector<std::vector<int32_t>> tokens(lengths.size()), tables(lengths.size());
    for (int step = 0; step < 9; ++step) {  // the prompts, then eight one-row steps
      ForwardBatch b;
      for (size_t i = 0; i < lengths.size(); ++i) {
        SeqRows r;
        r.start_pos = static_cast<int32_t>(tokens[i].size());
        const int n = step == 0 ? lengths[i] : 1;
        for (int k = 0; k < n; ++k) tokens[i].push_back(tok(rng));
        pool.reserve(tables[i], static_cast<int64_t>(tokens[i].size()));
        r.tokens = tokens[i].data() + r.start_pos;
        r.n_tokens = n;
        r.page_table = tables[i].data();
        r.n_pages = static_cast<int32_t>(tables[i].size());
        b.seqs.push_back(r);
      }
      const size_t n = size_t(b.logit_rows()) * f.vocab;
      const float *ref = cpu_ctx->forward(b);
      const std::vector<double> want(ref, ref + n);
      const float *got = cuda_ctx->forward(b);
      const std::vector<float> have(got, got + n);
      const double err = rel_l2(have, want);
      EXPECT_LT(err, kTolerance) << n_heads << " heads, " << lengths.size() << " sequences, "
                                 << (step == 0 ? "prompts" : "step ") << step;
      worst = std::max(worst, err);
    }
  }
  std::printf("[few pairs] %d heads over %d: worst relative L2 against the CPU: %.2e\n", n_heads,
              n_kv_heads, worst);
}

TEST(CudaVsCpuFewPairs, HeadDim128DecodeStepsMatchCpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  few_pairs_match_cpu(8, 2);
  few_pairs_match_cpu(28, 4);
}

// Token trees on the CUDA backend (tree masks in the paged kernel, move_kv):
// the tree root -> {a, b}; a -> {c, d}; b -> {e}; c -> {f} after a short
// prompt, in one verify pass (every node, kAll), then as a sparse draft level
// (nodes c d e, their ancestors in the cache), matches the CPU backend, whose
// tree attention test_token_trees proves equal to each path's chain. The
// check can fail: node c's row differs from the chain r a b c (what c would
// see without its mask) by far more than the tolerance. After moving the
// path r b e into place on both, the next token's logits match too; and so do
// the rows of an 80-node tree (past the verify kernel, on the paged one).
TEST_F(CudaVsCpu, TokenTreeRowsAndMovedPathMatchCpu) {
  const std::vector<int32_t> parents = {-1, 0, 0, 1, 1, 2, 3};
  const std::vector<int32_t> nodes = {785, 1290, 330, 4150, 12, 999, 2048};
  const int32_t V = config_->vocab_size;
  Seq s, wrong;
  const std::vector<int32_t> prompt = random_tokens(12);
  step({&s, &wrong}, {prompt, prompt}, {L::kLast, L::kLast}, "prompt");
  const int32_t base = static_cast<int32_t>(s.tokens.size());
  pool_->reserve(s.table, base + 7);
  pool_->reserve(wrong.table, base + 7);
  const TokenTree tree{base, parents.data(), 7};
  auto both = [&](const ForwardBatch &b, const char *what) {
    const size_t n = size_t(b.logit_rows()) * V;
    const float *ref = cpu_ctx_->forward(b);
    const std::vector<float> want(ref, ref + n);
    const float *got = cuda_ctx_->forward(b);
    const std::vector<float> have(got, got + n);
    for (size_t r = 0; r < n / V; ++r) {
      const std::vector<float> h(have.begin() + r * V, have.begin() + (r + 1) * V);
      const std::vector<double> w(want.begin() + r * V, want.begin() + (r + 1) * V);
      EXPECT_LT(rel_l2(h, w), kTolerance) << what << " row " << r;
    }
    return have;
  };
  ForwardBatch verify;
  verify.seqs.push_back(rows_after(s, nodes.data(), 7, L::kAll));
  verify.seqs[0].tree = &tree;
  const std::vector<float> tree_rows = both(verify, "tree verify pass");

  // The chain r a b c on the CPU: what node c (row 3) would see unmasked.
  ForwardBatch chain;
  chain.seqs.push_back(rows_after(wrong, nodes.data(), 4, L::kAll));
  const float *c = cpu_ctx_->forward(chain);
  const std::vector<float> unmasked(c + 3 * V, c + 4 * V);
  const std::vector<float> node_c(tree_rows.begin() + 3 * V, tree_rows.begin() + 4 * V);
  const double apart = rel_l2(node_c, std::vector<double>(unmasked.begin(), unmasked.end()));
  std::printf("node c against the unmasked chain r a b c: rel L2 %.3f\n", apart);
  EXPECT_GT(apart, 5 * kTolerance) << "the test cannot tell a masked row from an unmasked one";

  // A sparse draft level: nodes c d e over a selected set below the tree.
  const int32_t L8 = config_->n_layers, stride = base;
  std::vector<int32_t> positions(static_cast<size_t>(L8) * stride, 0), counts(L8, 0);
  for (int32_t l = 0; l < L8; ++l)
    for (int32_t p = 0; p < 6; p += 1 + l % 2)
      positions[static_cast<size_t>(l) * stride + counts[l]++] = p;
  const SparseAttention set{8, positions.data(), counts.data(), stride};
  ForwardBatch level;
  level.seqs.push_back(rows_after(s, nodes.data() + 3, 3, L::kAll));
  level.seqs[0].start_pos = base + 3;
  level.seqs[0].tree = &tree;
  level.seqs[0].sparse = &set;
  both(level, "sparse tree level");

  // Path r b e accepted: b to slot base + 1, e to base + 2; then a token after it.
  const int32_t from[] = {base + 2, base + 5}, to[] = {base + 1, base + 2};
  const KvMove move{s.table.data(), static_cast<int32_t>(s.table.size()), from, to, 2};
  cpu_ctx_->move_kv(move);
  cuda_ctx_->move_kv(move);
  const int32_t next = 4242;
  ForwardBatch after;
  after.seqs.push_back(rows_after(s, &next, 1, L::kLast));
  after.seqs[0].start_pos = base + 3;
  both(after, "after the moved path");
  // A tree of 80 nodes (more than the verify kernel's 64 rows: the paged
  // kernel's row tiles), each node's parent among the five before it.
  Seq big;
  step({&big}, {random_tokens(30)}, {L::kLast}, "prompt of the big tree");
  const int32_t big_base = static_cast<int32_t>(big.tokens.size());
  pool_->reserve(big.table, big_base + 80);
  std::vector<int32_t> big_parents = {-1}, big_nodes = random_tokens(80);
  for (int32_t n = 1; n < 80; ++n)
    big_parents.push_back(std::uniform_int_distribution<int32_t>(std::max(0, n - 5), n - 1)(rng_));
  const TokenTree big_tree{big_base, big_parents.data(), 80};
  ForwardBatch big_pass;
  big_pass.seqs.push_back(rows_after(big, big_nodes.data(), 80, L::kAll));
  big_pass.seqs[0].tree = &big_tree;
  both(big_pass, "80-node tree");

  // A position outside the table is an error, not a stray write.
  const int32_t far[] = {static_cast<int32_t>(s.table.size()) * 16};
  const KvMove bad{s.table.data(), static_cast<int32_t>(s.table.size()), far, to, 1};
  EXPECT_THROW(cuda_ctx_->move_kv(bad), Error);
}

TEST_F(CudaVsCpu, BadBatchIsAnError) {
  Seq a;
  a.tokens = {config_->vocab_size + 5};
  pool_->reserve(a.table, 1);
  EXPECT_THROW(cuda_ctx_->forward(alone(a)), Error);
}

}  // namespace
}  // namespace vegas::test
