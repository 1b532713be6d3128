// Logit candidates on the device (kernels/logit_candidates.cuh) against the
// host's extract_candidates, which build_distribution_from_candidates turns
// into build_distribution's result bit for bit (tests/unit/test_logit_candidates).
// The kernel only compares, so every row must match exactly: the same ids in
// the same order and the same logit bits, on each vocabulary size, for rows
// with ties at the k-th logit, masked tokens, -0/+0, fewer finite logits than
// k, more tied candidates than the buffer holds (overflow status) and bad rows
// (NaN, +inf, every logit -inf: bad-row status). Output buffers start poisoned.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "gpu_test_util.h"
#include "logit_candidates.cuh"
#include "sampling/sampling.h"

namespace vegas::test {
namespace {

constexpr int32_t kCap = kMaxCandidateTopK;

class LogitCandidatesKernel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
  std::mt19937 rng{20261123};
};

// One row of a named shape.
std::vector<float> row_of(const std::string &shape, int vocab, std::mt19937 &rng) {
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> r(static_cast<size_t>(vocab));
  for (float &x : r) x = 3.f * n(rng);
  if (shape == "ties") {  // a coarse grid: ties at every rank
    for (float &x : r) x = std::round(x);
  } else if (shape == "masked") {  // a few finite logits among -inf
    for (size_t i = 0; i < r.size(); ++i)
      if (rng() % 1000 != 0) r[i] = -INFINITY;
    r[rng() % r.size()] = 0.5f;
  } else if (shape == "zeros") {  // -0 and +0 at the top
    for (float &x : r) x = -std::fabs(x) - 1.f;
    for (int j = 0; j < 10; ++j) r[rng() % r.size()] = (j % 2) ? -0.0f : 0.0f;
  } else if (shape == "flat-top") {  // more tied maxima than the buffer holds
    for (int j = 0; j < kCap + 10; ++j) r[rng() % r.size()] = 50.f;
  } else if (shape == "nan") {
    r[rng() % r.size()] = NAN;
  } else if (shape == "inf") {
    r[rng() % r.size()] = INFINITY;
  } else if (shape == "all-masked") {
    for (float &x : r) x = -INFINITY;
  }
  return r;
}

// Device buffers of one launch over `logits` (rows of `vocab`) with k per
// row: the candidate layout's output (poisoned) and scratch for chunks.
struct Launch {
  Launch(const std::vector<float> &logits, const std::vector<int32_t> &k, int vocab)
      : rows(static_cast<int>(k.size())),
        d_logits(logits),
        d_k(k),
        d_out(static_cast<size_t>(rows) * (1 + 2 * kCap)),
        d_scratch(static_cast<size_t>(kernels::logit_candidates_scratch_ints(rows, vocab, kCap))) {
    p.logits = d_logits.get();
    p.k = d_k.get();
    p.count = d_out.get();
    p.ids = d_out.get() + rows;
    p.values = d_out.as<float>() + rows + rows * kCap;
    p.rows = rows;
    p.vocab = vocab;
    p.cap = kCap;
  }
  int rows;
  Dev<float> d_logits;
  Dev<int32_t> d_k, d_out, d_scratch;
  kernels::CandidateParams p;
};

// Proves: count, ids and logit bits of every row equal the host's, or the
// row gets the status the host's outcome calls for.
TEST_F(LogitCandidatesKernel, MatchesHostExactly) {
  const std::vector<std::string> shapes = {"normal",   "ties", "masked", "zeros",
                                           "flat-top", "nan",  "inf",    "all-masked"};
  const std::vector<int32_t> ks = {1, 2, 20, 40, kCap};
  int64_t rows_checked = 0, overflow_rows = 0, bad_rows = 0;
  // 8192 and 5003 take the kernel's registers path (float4 and scalar
  // loads, the latter with padding), 151936 the row-in-memory one without
  // scratch, with it the chunks' (19 of 8192, the last partial), and 40003
  // the chunks' with scalar loads.
  for (const auto &[vocab, scratch] : std::vector<std::pair<int, bool>>{
           {8192, false}, {5003, false}, {151936, false}, {151936, true}, {40003, true}}) {
    std::vector<float> logits;
    std::vector<int32_t> k;
    std::vector<std::string> row_shape;
    for (const std::string &shape : shapes)
      for (int32_t kk : ks) {
        const std::vector<float> r = row_of(shape, vocab, rng);
        logits.insert(logits.end(), r.begin(), r.end());
        k.push_back(kk);
        row_shape.push_back(shape);
      }
    Launch launch(logits, k, vocab);
    const int rows = launch.rows;
    if (scratch) launch.p.scratch = launch.d_scratch.get();
    CUDA_OK(kernels::logit_candidates(launch.p, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<int32_t> out = launch.d_out.download();
    for (int i = 0; i < rows; ++i) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + (scratch ? " chunked" : "") + " row " +
                   row_shape[i] + " k " + std::to_string(k[i]));
      LogitCandidates host;
      bool host_bad = false;
      try {
        extract_candidates(logits.data() + static_cast<size_t>(i) * vocab, vocab, k[i], &host);
      } catch (const Error &) {
        host_bad = true;
      }
      const int32_t count = out[i];
      if (host_bad) {
        EXPECT_EQ(count, kernels::kCandidatesBadRow);
        ++bad_rows;
        continue;
      }
      if (static_cast<int32_t>(host.ids.size()) > kCap) {
        EXPECT_EQ(count, kernels::kCandidatesOverflow);
        ++overflow_rows;
        continue;
      }
      ASSERT_EQ(count, static_cast<int32_t>(host.ids.size()));
      const int32_t *ids = out.data() + rows + static_cast<size_t>(i) * kCap;
      const int32_t *bits = out.data() + rows + static_cast<size_t>(rows) * kCap + i * kCap;
      for (int32_t j = 0; j < count; ++j) {
        EXPECT_EQ(ids[j], host.ids[j]) << "candidate " << j;
        uint32_t hb;
        std::memcpy(&hb, &host.logits[j], 4);
        EXPECT_EQ(static_cast<uint32_t>(bits[j]), hb) << "candidate " << j;
      }
      ++rows_checked;
    }
  }
  std::printf("[candidates] rows matched %lld, overflow %lld, bad %lld\n",
              static_cast<long long>(rows_checked), static_cast<long long>(overflow_rows),
              static_cast<long long>(bad_rows));
  EXPECT_GT(overflow_rows, 0);  // the flat-top rows
  EXPECT_EQ(bad_rows, 3 * 5 * static_cast<int64_t>(ks.size()));
}

// Proves the launch refuses bad parameters instead of running.
TEST_F(LogitCandidatesKernel, RejectsBadParams) {
  kernels::CandidateParams p;
  p.rows = 1;
  p.vocab = 8;
  p.cap = kCap;
  EXPECT_EQ(kernels::logit_candidates(p, nullptr), cudaErrorInvalidValue);  // null buffers
  p.rows = 0;
  EXPECT_EQ(kernels::logit_candidates(p, nullptr), cudaSuccess);  // nothing to do
}

// Timing, no assertion: a draft pass's 16 rows of 22m's 8192 logits (k 20).
TEST_F(LogitCandidatesKernel, TimingOfDraftRows) {
  const int vocab = 8192, rows = 16;
  std::vector<float> logits;
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> row = row_of("normal", vocab, rng);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  Launch launch(logits, std::vector<int32_t>(static_cast<size_t>(rows), 20), vocab);
  const double us =
      median_launch_us([&] { return kernels::logit_candidates(launch.p, nullptr); }, 20, 5);
  ASSERT_GE(us, 0.0) << "logit_candidates failed";
  std::printf("[candidates] %d x %d logits, k 20: median %.1f us\n", rows, vocab, us);
}

// Timing, no assertion: one and four rows of Qwen's 151,936 logits (k 20),
// one block a row reading it at every pass against the chunks with scratch.
TEST_F(LogitCandidatesKernel, TimingOfLongRows) {
  const int vocab = 151936;
  for (const int rows : {1, 4}) {
    std::vector<float> logits;
    for (int r = 0; r < rows; ++r) {
      const std::vector<float> row = row_of("normal", vocab, rng);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    Launch launch(logits, std::vector<int32_t>(static_cast<size_t>(rows), 20), vocab);
    kernels::CandidateParams &p = launch.p;
    for (const bool scratch : {false, true}) {
      p.scratch = scratch ? launch.d_scratch.get() : nullptr;
      const double us =
          median_launch_us([&] { return kernels::logit_candidates(p, nullptr); }, 20, 5);
      ASSERT_GE(us, 0.0) << "logit_candidates failed";
      std::printf("[candidates] %d x %d logits, k 20, %s: median %.1f us\n", rows, vocab,
                  scratch ? "chunks" : "one block a row", us);
    }
  }
}

}  // namespace
}  // namespace vegas::test
