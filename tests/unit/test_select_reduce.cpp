// Score reduction: softmax weights from stored logits + lse equal a softmax the
// test computes directly from q and k over every attended key; the logit mean;
// and which verify rows vegas, vegas-all and specextend read.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/error.h"
#include "select/score_reduce.h"
#include "select/select_policy.h"

namespace vegas {
namespace {

// A verification pass in double precision: row r sits at position n - 1 + r and
// attends causally to keys [0, n + r); the view keeps the candidates [0, n).
struct FakeVerify {
  int32_t n, rows, heads, dim;
  int64_t stride;
  std::vector<std::vector<double>> logit;  // [row*heads+head][key]
  std::vector<float> view_logits;          // [row][head][stride]
  std::vector<float> view_lse;

  FakeVerify(int32_t n_, int32_t rows_, int32_t heads_, int32_t dim_, uint32_t seed)
      : n(n_), rows(rows_), heads(heads_), dim(dim_), stride(n_ + 5) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    const int32_t keys = n + rows;
    std::vector<double> k(static_cast<size_t>(keys) * dim);
    for (auto &v : k) v = normal(rng);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
    view_logits.assign(static_cast<size_t>(rows * heads) * stride, 1e30f);  // poison padding
    for (int32_t r = 0; r < rows; ++r) {
      for (int32_t h = 0; h < heads; ++h) {
        std::vector<double> q(static_cast<size_t>(dim));
        for (auto &v : q) v = 2.0 * normal(rng);
        std::vector<double> line(static_cast<size_t>(n + r));
        double max_logit = -1e300;
        for (int32_t key = 0; key < n + r; ++key) {
          double dot = 0;
          for (int32_t d = 0; d < dim; ++d) dot += q[d] * k[static_cast<size_t>(key) * dim + d];
          line[key] = scale * dot;
          max_logit = std::max(max_logit, line[key]);
        }
        double sum = 0;
        for (double l : line) sum += std::exp(l - max_logit);
        view_lse.push_back(static_cast<float>(max_logit + std::log(sum)));
        for (int32_t pos = 0; pos < n; ++pos)
          view_logits[(static_cast<size_t>(r) * heads + h) * stride + pos] =
              static_cast<float>(line[pos]);
        logit.push_back(line);
      }
    }
  }

  ScoreView view() const {
    ScoreView v;
    v.logits = view_logits.data();
    v.lse = view_lse.data();
    v.n_rows = rows;
    v.stride = stride;
    return v;
  }

  // Mean over `used` rows and all heads of the direct softmax weight of pos.
  double weight(const std::vector<int32_t> &used, int32_t pos) const {
    double acc = 0;
    for (int32_t r : used) {
      for (int32_t h = 0; h < heads; ++h) {
        const auto &line = logit[static_cast<size_t>(r) * heads + h];
        double denom = 0;
        for (double l : line) denom += std::exp(l);
        acc += std::exp(line[pos]) / denom;
      }
    }
    return acc / (static_cast<double>(used.size()) * heads);
  }
};

// Proves the weight reduction from float logits + lse matches a softmax over
// every attended key (candidates and the causal tail) computed here in double,
// averaged over the first and last rows and all heads. The relative tolerance
// 2e-6 is ~16 float roundings: stored logit and lse, exp, and the 16-term sum.
TEST(SelectReduce, WeightsMatchDirectSoftmax) {
  const FakeVerify fv(300, 7, 8, 16, 42);
  std::vector<float> out(300);
  const int32_t rows[2] = {0, 6};
  reduce_scores(fv.view(), 8, rows, 2, 300, ScoreKind::kWeight, out.data());
  for (int32_t pos = 0; pos < 300; ++pos) {
    const double want = fv.weight({0, 6}, pos);
    EXPECT_NEAR(out[pos], want, 2e-6 * want + 1e-30) << pos;
  }
}

// Proves a reduction shared by threads (the library's workers, as a host-side
// selection at long contexts runs it) gives the same bits as one thread, for
// weights and logits, and stays the softmax weight at spot positions.
TEST(SelectReduce, ThreadsGiveTheSameBits) {
  const int32_t n = 10000;
  const FakeVerify fv(n, 2, 8, 16, 11);
  const int32_t rows[2] = {0, 1};
  for (ScoreKind kind : {ScoreKind::kWeight, ScoreKind::kLogit}) {
    std::vector<float> one(n, -1.0f), shared(n, -2.0f);
    reduce_scores(fv.view(), 8, rows, 2, n, kind, one.data(), 1);
    reduce_scores(fv.view(), 8, rows, 2, n, kind, shared.data(), 4);
    EXPECT_EQ(std::memcmp(one.data(), shared.data(), sizeof(float) * n), 0)
        << (kind == ScoreKind::kWeight ? "weights" : "logits");
  }
  std::vector<float> out(n);
  reduce_scores(fv.view(), 8, rows, 2, n, ScoreKind::kWeight, out.data(), 4);
  for (int32_t pos : {0, 1023, 1024, 4999, 9999}) {
    const double want = fv.weight({0, 1}, pos);
    EXPECT_NEAR(out[pos], want, 2e-6 * want + 1e-30) << pos;
  }
}

// Proves the logit reduction is the plain mean of the stored logits.
TEST(SelectReduce, LogitMean) {
  const FakeVerify fv(64, 3, 4, 8, 7);
  std::vector<float> out(64);
  const int32_t rows[3] = {0, 1, 2};
  reduce_scores(fv.view(), 4, rows, 3, 64, ScoreKind::kLogit, out.data());
  for (int32_t pos = 0; pos < 64; ++pos) {
    double want = 0;
    for (int32_t line = 0; line < 12; ++line) want += fv.logit[line][pos];
    want /= 12;
    EXPECT_NEAR(out[pos], want, 1e-5 * (1 + std::fabs(want))) << pos;
  }
}

// Proves a view with a NULL pointer, too few rows or a short stride is refused
// naming the policy.
TEST(SelectReduce, ViewChecks) {
  const FakeVerify fv(16, 2, 2, 4, 1);
  ScoreView v = fv.view();
  EXPECT_NO_THROW(check_score_view(v, 16, 2, "vegas"));
  v.stride = 15;
  EXPECT_THROW(check_score_view(v, 16, 2, "vegas"), Error);
  v = fv.view();
  EXPECT_THROW(check_score_view(v, 16, 3, "vegas"), Error);
  v.lse = nullptr;
  try {
    check_score_view(v, 16, 1, "vegas-all");
    FAIL();
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("vegas-all"), std::string::npos);
  }
}

// Row r of a 4-row view spikes at positions 10r+1 and 10r+2; everything else
// is flat. Which spikes a policy keeps shows which rows it read.
struct SpikeView {
  static constexpr int32_t kN = 40, kRows = 4, kHeads = 2;
  std::vector<float> logits = std::vector<float>(kRows * kHeads * kN, 0.0f);
  std::vector<float> lse = std::vector<float>(kRows * kHeads, 5.0f);
  SpikeView() {
    for (int32_t r = 0; r < kRows; ++r)
      for (int32_t h = 0; h < kHeads; ++h)
        for (int32_t pos : {10 * r + 1, 10 * r + 2}) logits[(r * kHeads + h) * kN + pos] = 4.0f;
  }
  SelectInput input(int32_t n_rows) const {
    SelectInput in;
    in.n = kN;
    in.scores.logits = logits.data();
    in.scores.lse = lse.data();
    in.scores.n_rows = n_rows;
    in.scores.stride = kN;
    return in;
  }
};

std::vector<int32_t> run(const char *name, int32_t k, const SelectInput &in) {
  SelectionShape shape;
  shape.max_candidates = SpikeView::kN;
  shape.max_rows = SpikeView::kRows;
  shape.n_heads = SpikeView::kHeads;
  shape.n_kv_heads = 1;
  shape.head_dim = 4;
  SelectionOptions options;
  options.ratio = static_cast<float>(k) / SpikeView::kN;
  options.min_tokens = 0;
  options.window_share = 0.0f;
  auto policy = make_selection_policy(name, options, shape);
  std::vector<int32_t> out(SpikeView::kN);
  out.resize(static_cast<size_t>(policy->select(in, out.data(), SpikeView::kN)));
  return out;
}

// Proves vegas reads exactly the first and last rows, vegas-all every row,
// specextend only the last accepted token's row, and vegas with one row
// (after prefill) reads that row.
TEST(SelectReduce, RowsEachPolicyReads) {
  const SpikeView sv;
  EXPECT_EQ(run("vegas", 4, sv.input(4)), (std::vector<int32_t>{1, 2, 31, 32}));
  EXPECT_EQ(run("vegas-all", 8, sv.input(4)), (std::vector<int32_t>{1, 2, 11, 12, 21, 22, 31, 32}));
  SelectInput in = sv.input(4);
  in.last_accepted_row = 2;
  EXPECT_EQ(run("specextend", 2, in), (std::vector<int32_t>{21, 22}));
  in.last_accepted_row = 4;  // beyond the rows collected
  EXPECT_THROW(run("specextend", 2, in), Error);
  EXPECT_EQ(run("vegas", 2, sv.input(1)), (std::vector<int32_t>{1, 2}));
}

}  // namespace
}  // namespace vegas
