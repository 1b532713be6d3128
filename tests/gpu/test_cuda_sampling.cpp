// Device sampling (kernels/sampling.cuh) against the host rules
// (build_distribution + sample_from with the same Rng draw). Every case prints
// one `[sampling]` line: rows compared, rows where device and host agree, and
// how each disagreement is explained; a disagreement is allowed only where the
// host's own numbers put a boundary within 1e-5 of the draw (an inverse-CDF
// boundary, the top-p cut, or a weight equal to min_p to 1e-6), since the
// device sums in another order. A chi-square test checks the device's samples
// against the host probabilities, penalties must edit the logits bit-exactly,
// and a micro-benchmark prints µs per step (argmax kernel vs sample kernel per
// rule, for 16 and 64 rows at vocab 8192 and 151936).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>

#include "argmax.cuh"
#include "gpu_test_util.h"
#include "logit_candidates.cuh"
#include "sampling.cuh"
#include "sampling/penalties.h"
#include "sampling/sampling.h"

namespace vegas::test {
namespace {

using kernels::SamplingRow;

// A named sampling rule (SamplingParams without penalties).
struct Rule {
  const char *name;
  SamplingParams p;
};

SamplingParams rule(float t, int32_t k, float top_p, float min_p) {
  SamplingParams p;
  p.temperature = t;
  p.top_k = k;
  p.top_p = top_p;
  p.min_p = min_p;
  return p;
}

const std::vector<Rule> &rules() {
  static const std::vector<Rule> r = {
      {"greedy", rule(0.0f, 0, 1.0f, 0.0f)},
      {"t1", rule(1.0f, 0, 1.0f, 0.0f)},
      {"t0.7/k40", rule(0.7f, 40, 1.0f, 0.0f)},
      {"t0.6/k20/p0.95", rule(0.6f, 20, 0.95f, 0.0f)},
      {"t1/p0.9", rule(1.0f, 0, 0.9f, 0.0f)},
      {"t1.3/minp0.05", rule(1.3f, 0, 1.0f, 0.05f)},
      {"t0.8/p0.5/minp0.1", rule(0.8f, 0, 0.5f, 0.1f)},
      {"t1/k5000/p0.99", rule(1.0f, 5000, 0.99f, 0.0f)},
      {"t2/p0.999", rule(2.0f, 0, 0.999f, 0.0f)},
  };
  return r;
}

// Logit rows of a named shape.
std::vector<float> make_logits(const std::string &dist, int rows, int vocab, std::mt19937 &rng) {
  std::vector<float> l(size_t(rows) * vocab);
  std::normal_distribution<float> n(0.f, 1.f);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (int r = 0; r < rows; ++r) {
    float *row = l.data() + size_t(r) * vocab;
    if (dist == "normal") {  // broad: the nucleus is a large part of the vocabulary
      for (int i = 0; i < vocab; ++i) row[i] = 2.f * n(rng);
    } else if (dist == "peaked") {  // a handful of tokens carry most of the mass
      for (int i = 0; i < vocab; ++i) row[i] = n(rng);
      for (int j = 0; j < 6; ++j) row[rng() % vocab] = 9.f + 1.5f * j + u(rng);
    } else if (dist == "llm") {  // Zipf-like ranks, as language models give
      std::vector<int> perm(static_cast<size_t>(vocab));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int i = 0; i < vocab; ++i)
        row[perm[i]] = 18.f - 1.6f * std::log(1.f + i) + 0.3f * n(rng);
    } else if (dist == "flat") {  // near-uniform: huge nucleus
      for (int i = 0; i < vocab; ++i) row[i] = 0.01f * u(rng);
    } else if (dist == "ties") {  // few distinct values: ties everywhere, incl. the max
      for (int i = 0; i < vocab; ++i) row[i] = std::round(2.f * n(rng)) * 0.5f;
    } else if (dist == "masked") {  // 90% -inf, the rest broad
      for (int i = 0; i < vocab; ++i) row[i] = u(rng) < 0.9f ? -INFINITY : 2.f * n(rng);
      row[rng() % vocab] = 3.f;
    }
  }
  return l;
}

SamplingRow device_rule(const SamplingParams &p, uint64_t counter) {
  SamplingRow s;
  s.temperature = p.temperature;
  s.top_k = p.top_k;
  s.top_p = p.top_p;
  s.min_p = p.min_p;
  s.seed = p.seed;
  s.counter = counter;
  return s;
}

// Runs the kernel over `rows` rows of logits; returns the tokens (or errors).
std::vector<int32_t> device_sample(const std::vector<float> &logits, int vocab,
                                   const std::vector<SamplingRow> &rr) {
  const int rows = int(rr.size());
  Dev<float> dl(logits);
  Dev<SamplingRow> dr(rr);
  Dev<int32_t> out(static_cast<size_t>(rows), 0x7f);
  kernels::SampleParams p{dl.get(), dr.get(), out.get(), rows, vocab};
  EXPECT_EQ(kernels::sample(p, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return out.download();
}

double host_uniform(const SamplingParams &p, uint64_t counter) {
  Rng r(p.seed);
  r.set_counter(counter);
  return r.uniform();
}

int32_t host_token(const float *row, int vocab, const SamplingParams &p, uint64_t counter,
                   TokenDistribution *dist) {
  build_distribution(row, vocab, p, {}, dist);
  return p.greedy() ? dist->ids[0] : sample_from(*dist, host_uniform(p, counter));
}

enum class Why { kCdf, kTopP, kMinP, kNone };

// Why device token `dev` may differ from host token `host` for this row: an
// inverse-CDF boundary between them within eps of u, the top-p cut within eps
// of top_p, or a candidate's weight within 1e-6 (relative) of min_p.
Why explain(const float *row, int vocab, const SamplingParams &p, const TokenDistribution &dist,
            double u, int32_t host, int32_t dev) {
  constexpr double eps = 1e-5;
  double total = 0;
  for (float q : dist.probs) total += q;
  const int32_t lo = std::min(host, dev), hi = std::max(host, dev);
  double through_lo = 0, between = 0;
  bool dev_in = false;
  for (size_t j = 0; j < dist.ids.size(); ++j) {
    if (dist.ids[j] <= lo) through_lo += dist.probs[j];
    if (dist.ids[j] > lo && dist.ids[j] < hi) between += dist.probs[j];
    dev_in |= dist.ids[j] == dev;
  }
  if (dev_in && std::abs(through_lo / total - u) <= eps && between / total <= eps) return Why::kCdf;
  // The host's candidates (top-k keeps ties of the k-th) and their weights.
  const float mx = *std::max_element(row, row + vocab);
  std::vector<int32_t> cand;
  for (int i = 0; i < vocab; ++i)
    if (row[i] != -INFINITY) cand.push_back(i);
  if (p.top_k > 0 && p.top_k < int(cand.size())) {
    std::vector<float> v;
    for (int32_t i : cand) v.push_back(row[i]);
    std::nth_element(v.begin(), v.begin() + (p.top_k - 1), v.end(), std::greater<float>());
    const float th = v[size_t(p.top_k - 1)];
    cand.erase(std::remove_if(cand.begin(), cand.end(), [&](int32_t i) { return row[i] < th; }),
               cand.end());
  }
  std::vector<double> w(static_cast<size_t>(vocab), 0.0);
  double cand_total = 0;
  for (int32_t i : cand) cand_total += w[i] = std::exp((row[i] - mx) / p.temperature);
  if (p.top_p < 1.0f) {
    std::sort(cand.begin(), cand.end(),
              [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    double cum = 0;
    for (int32_t i : cand) {
      const double before = cum;
      cum += w[i];
      if (cum >= p.top_p * cand_total) {  // the host's last nucleus token
        if ((p.top_p * cand_total - before) / cand_total <= eps ||
            (cum - p.top_p * cand_total) / cand_total <= eps)
          return Why::kTopP;
        break;
      }
    }
  }
  if (p.min_p > 0.0f)
    for (int32_t i : cand)
      if (std::abs(float(std::exp((row[i] - mx) / p.temperature)) - p.min_p) <= 1e-6 * p.min_p)
        return Why::kMinP;
  return Why::kNone;
}

struct Tally {
  int rows = 0, same = 0, cdf = 0, top_p = 0, min_p = 0, unexplained = 0;
  void add(Why w) {
    ++rows;
    if (w == Why::kCdf) ++cdf;
    if (w == Why::kTopP) ++top_p;
    if (w == Why::kMinP) ++min_p;
    if (w == Why::kNone) ++unexplained;
  }
};

class Sampling : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
  std::mt19937 rng{20261122};
};

// (a) Device token == host token for many rows, shapes, rules, seeds and counters.
TEST_F(Sampling, AgreesWithHost) {
  Tally all;
  for (int vocab : {8192, 151936}) {
    const int rows = vocab > 10000 ? 12 : 48;
    for (const char *dist : {"normal", "peaked", "llm", "flat", "ties", "masked"}) {
      const auto logits = make_logits(dist, rows, vocab, rng);
      for (const Rule &r : rules()) {
        std::vector<SamplingRow> rr;
        std::vector<SamplingParams> ps;
        for (int i = 0; i < rows; ++i) {
          SamplingParams p = r.p;
          p.seed = rng() * 0x100000001ULL + i;
          ps.push_back(p);
          rr.push_back(device_rule(p, (uint64_t(rng()) << 20) + i));
        }
        const auto got = device_sample(logits, vocab, rr);
        Tally t;
        TokenDistribution dist_h;
        for (int i = 0; i < rows; ++i) {
          const float *row = logits.data() + size_t(i) * vocab;
          const int32_t want = host_token(row, vocab, ps[i], rr[i].counter, &dist_h);
          if (got[i] == want) {
            ++t.rows;
            ++t.same;
            continue;
          }
          const Why why = got[i] < 0 ? Why::kNone
                                     : explain(row, vocab, ps[i], dist_h,
                                               host_uniform(ps[i], rr[i].counter), want, got[i]);
          t.add(why);
          if (why == Why::kNone)
            ADD_FAILURE() << "vocab " << vocab << " " << dist << " " << r.name << " row " << i
                          << ": device " << got[i] << ", host " << want << " (unexplained)";
        }
        std::printf(
            "[sampling] agree vocab=%d dist=%s rule=%s rows=%d same=%d cdf_boundary=%d "
            "top_p_boundary=%d min_p_boundary=%d unexplained=%d\n",
            vocab, dist, r.name, t.rows, t.same, t.cdf, t.top_p, t.min_p, t.unexplained);
        all.rows += t.rows, all.same += t.same, all.cdf += t.cdf, all.top_p += t.top_p;
        all.min_p += t.min_p, all.unexplained += t.unexplained;
      }
    }
  }
  const double rate = double(all.same) / all.rows;
  std::printf("[sampling] agree TOTAL rows=%d same=%d (%.4f%%) explained=%d unexplained=%d\n",
              all.rows, all.same, 100 * rate, all.cdf + all.top_p + all.min_p, all.unexplained);
  EXPECT_GE(rate, 0.999);
  EXPECT_EQ(all.unexplained, 0);
}

// logit_candidates (k = candidate_k of each row's rule, cap 64) then
// sample_candidates over them: the tokens and each row's candidate count.
std::vector<int32_t> device_sample_candidates(const std::vector<float> &logits, int vocab,
                                              const std::vector<SamplingRow> &rr,
                                              const std::vector<SamplingParams> &ps,
                                              std::vector<int32_t> *counts) {
  constexpr int kCap = 64;
  const int rows = int(rr.size());
  std::vector<int32_t> k;
  for (const SamplingParams &p : ps) k.push_back(candidate_k(p));
  Dev<float> dl(logits), values(size_t(rows) * kCap);
  Dev<SamplingRow> dr(rr);
  Dev<int32_t> dk(k), count(static_cast<size_t>(rows)), ids(size_t(rows) * kCap),
      out(static_cast<size_t>(rows), 0x7f);
  kernels::CandidateParams cp{dl.get(),     dk.get(), count.get(), ids.get(),
                              values.get(), rows,     vocab,       kCap};
  EXPECT_EQ(kernels::logit_candidates(cp, nullptr), cudaSuccess);
  kernels::CandidateSampleParams sp;
  sp.count = count.get();
  sp.ids = ids.get();
  sp.values = values.get();
  sp.cap = kCap;
  sp.rules = dr.get();
  sp.out = out.get();
  sp.rows = rows;
  EXPECT_EQ(kernels::sample_candidates(sp, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (counts) *counts = count.download();
  return out.download();
}

// (a') The draft chain's sampler: for every rule that reads only candidates
// (top-k in 1..64, or greedy), drawing from the row's device candidates gives
// the host's token from the whole row, with the same allowance for float
// summation order as (a).
TEST_F(Sampling, FromCandidatesAgreesWithHost) {
  const int vocab = 8192, rows = 64;
  std::vector<Rule> cand_rules = {
      {"t0.8/k30/p0.5/minp0.1", rule(0.8f, 30, 0.5f, 0.1f)},
      {"t1.5/k64/p0.9", rule(1.5f, 64, 0.9f, 0.0f)},
      {"t1/k1", rule(1.0f, 1, 1.0f, 0.0f)},
  };
  for (const Rule &r : rules())
    if (candidate_k(r.p) > 0) cand_rules.push_back(r);
  ASSERT_GE(cand_rules.size(), 6u);  // greedy, k40, k20/p0.95 among them
  Tally all;
  for (const char *dist : {"normal", "peaked", "llm", "flat", "masked"}) {
    const auto logits = make_logits(dist, rows, vocab, rng);
    for (const Rule &r : cand_rules) {
      std::vector<SamplingRow> rr;
      std::vector<SamplingParams> ps;
      for (int i = 0; i < rows; ++i) {
        SamplingParams p = r.p;
        p.seed = rng() * 0x100000001ULL + i;
        ps.push_back(p);
        rr.push_back(device_rule(p, (uint64_t(rng()) << 20) + i));
      }
      std::vector<int32_t> counts;
      const auto got = device_sample_candidates(logits, vocab, rr, ps, &counts);
      TokenDistribution dist_h;
      for (int i = 0; i < rows; ++i) {
        ASSERT_GT(counts[i], 0) << dist << " " << r.name << " row " << i;
        const float *row = logits.data() + size_t(i) * vocab;
        const int32_t want = host_token(row, vocab, ps[i], rr[i].counter, &dist_h);
        if (got[i] == want) {
          ++all.rows;
          ++all.same;
          continue;
        }
        const Why why = got[i] < 0 ? Why::kNone
                                   : explain(row, vocab, ps[i], dist_h,
                                             host_uniform(ps[i], rr[i].counter), want, got[i]);
        all.add(why);
        if (why == Why::kNone)
          ADD_FAILURE() << dist << " " << r.name << " row " << i << ": device " << got[i]
                        << ", host " << want << " (unexplained)";
      }
    }
  }
  std::printf("[sampling] from candidates rows=%d same=%d explained=%d unexplained=%d\n", all.rows,
              all.same, all.cdf + all.top_p + all.min_p, all.unexplained);
  EXPECT_GE(double(all.same) / all.rows, 0.999);
  EXPECT_EQ(all.unexplained, 0);
}

// A row whose candidates overflow (more ties at the k-th logit than the
// buffer holds) gets token 0 and keeps its overflow count for the caller; a
// row with a NaN gets kSampleBadRow.
TEST_F(Sampling, FromCandidatesStatusRows) {
  const int vocab = 8192;
  std::vector<float> logits(size_t(2) * vocab, 1.0f);  // row 0: all tied
  logits[vocab + 17] = NAN;                            // row 1: a NaN
  const SamplingParams p = rule(0.7f, 20, 0.95f, 0.0f);
  const std::vector<SamplingParams> ps = {p, p};
  const std::vector<SamplingRow> rr = {device_rule(p, 1), device_rule(p, 2)};
  std::vector<int32_t> counts;
  const auto got = device_sample_candidates(logits, vocab, rr, ps, &counts);
  EXPECT_EQ(counts[0], kernels::kCandidatesOverflow);
  EXPECT_EQ(got[0], 0);
  EXPECT_EQ(counts[1], kernels::kCandidatesBadRow);
  EXPECT_EQ(got[1], kernels::kSampleBadRow);
}

// Wilson-Hilferty: the chi-square quantile for df degrees of freedom at z.
double chi2_quantile(int df, double z) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3);
}

// (b) Device samples over many counters follow the host distribution
// (chi-square, alpha = 0.001: z = 3.0902).
TEST_F(Sampling, ChiSquareAgainstHostProbabilities) {
  const int vocab = 4096, draws = 40000, batch = 4000;
  for (const Rule &r : {Rule{"t1/p0.9", rule(1.0f, 0, 0.9f, 0.0f)},
                        Rule{"t0.7/k30/minp0.02", rule(0.7f, 30, 1.0f, 0.02f)}}) {
    const auto one = make_logits("llm", 1, vocab, rng);
    TokenDistribution dist;
    build_distribution(one.data(), vocab, r.p, {}, &dist);
    std::vector<float> logits;
    for (int i = 0; i < batch; ++i) logits.insert(logits.end(), one.begin(), one.end());
    std::vector<int64_t> hits(static_cast<size_t>(vocab), 0);
    for (int b = 0; b < draws / batch; ++b) {
      std::vector<SamplingRow> rr;
      for (int i = 0; i < batch; ++i) rr.push_back(device_rule(r.p, uint64_t(b) * batch + i));
      for (int32_t t : device_sample(logits, vocab, rr)) {
        ASSERT_TRUE(t >= 0 && t < vocab) << t;
        ++hits[size_t(t)];
      }
    }
    // Bins: tokens expecting >= 5 draws; the rest of the support pooled; any
    // draw outside the support fails outright.
    double chi2 = 0, pooled_exp = 0, pooled_obs = 0;
    int bins = 0;
    int64_t in_support = 0;
    for (size_t j = 0; j < dist.ids.size(); ++j) {
      const double e = double(dist.probs[j]) * draws;
      const double o = double(hits[size_t(dist.ids[j])]);
      in_support += hits[size_t(dist.ids[j])];
      if (e >= 5) {
        chi2 += (o - e) * (o - e) / e;
        ++bins;
      } else {
        pooled_exp += e;
        pooled_obs += o;
      }
    }
    if (pooled_exp > 0) {
      chi2 += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp;
      ++bins;
    }
    const double crit = chi2_quantile(bins - 1, 3.0902);
    std::printf("[sampling] chi2 rule=%s support=%d draws=%d bins=%d chi2=%.1f critical=%.1f\n",
                r.name, dist.size(), draws, bins, chi2, crit);
    EXPECT_EQ(in_support, draws) << "device drew tokens outside the host support";
    EXPECT_LT(chi2, crit);
  }
}

// (c) Greedy rows and sampled rows in one launch.
TEST_F(Sampling, GreedyMixedWithSampled) {
  const int vocab = 151936, rows = 16;
  const auto logits = make_logits("llm", rows, vocab, rng);
  std::vector<SamplingRow> rr;
  std::vector<SamplingParams> ps;
  for (int i = 0; i < rows; ++i) {
    SamplingParams p = rules()[size_t(i % 2 == 0 ? 0 : 1 + i % (rules().size() - 1))].p;
    p.seed = 7 + i;
    ps.push_back(p);
    rr.push_back(device_rule(p, 1000 + i));
  }
  const auto got = device_sample(logits, vocab, rr);
  TokenDistribution d;
  for (int i = 0; i < rows; ++i) {
    const float *row = logits.data() + size_t(i) * vocab;
    if (ps[i].greedy())
      EXPECT_EQ(got[i], argmax(row, vocab)) << "row " << i;
    else
      EXPECT_EQ(got[i], host_token(row, vocab, ps[i], rr[i].counter, &d)) << "row " << i;
  }
  std::printf("[sampling] mixed greedy+sampled rows=%d checked\n", rows);
}

// (d) Edges: top_k = 1 and tiny top_p keep only the largest logit (ties: top-k
// keeps them all, top-p only the lowest id); min_p = 1 keeps the maximum and
// its ties; top_k >= the finite count is off.
TEST_F(Sampling, EdgeRules) {
  const int vocab = 8192;
  auto logits = make_logits("normal", 1, vocab, rng);
  logits[5000] = logits[300] = logits[7000] = 40.f;  // three-way tie at the max
  const std::vector<SamplingParams> edge = {
      rule(1.0f, 1, 1.0f, 0.0f), rule(1.0f, 0, 1e-7f, 0.0f), rule(0.5f, 0, 1.0f, 1.0f),
      rule(1.0f, vocab, 1.0f, 0.0f), rule(1.0f, vocab + 5, 0.3f, 0.0f)};
  const int reps = 64;
  for (size_t e = 0; e < edge.size(); ++e) {
    std::vector<float> l;
    std::vector<SamplingRow> rr;
    for (int i = 0; i < reps; ++i) {
      l.insert(l.end(), logits.begin(), logits.end());
      rr.push_back(device_rule(edge[e], 31 * i + e));
    }
    const auto got = device_sample(l, vocab, rr);
    TokenDistribution d;
    std::vector<int32_t> seen;
    for (int i = 0; i < reps; ++i) {
      EXPECT_EQ(got[i], host_token(logits.data(), vocab, edge[e], rr[i].counter, &d))
          << "edge " << e << " rep " << i;
      seen.push_back(got[i]);
    }
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    if (e == 0 || e == 2) {
      EXPECT_EQ(seen, (std::vector<int32_t>{300, 5000, 7000})) << "edge " << e;
    }
    if (e == 1) {
      EXPECT_EQ(seen, (std::vector<int32_t>{300})) << "edge " << e;
    }
    std::printf("[sampling] edge %zu: t=%.2f top_k=%d top_p=%g min_p=%g -> %zu distinct tokens\n",
                e, double(edge[e].temperature), edge[e].top_k, double(edge[e].top_p),
                double(edge[e].min_p), seen.size());
  }
}

// (e) -inf masks tokens; NaN / +inf logits, all-masked rows and bad rules are
// per-row errors; the launch finishes.
TEST_F(Sampling, MaskedAndBadRows) {
  const int vocab = 8192, rows = 8;
  auto l = make_logits("normal", rows, vocab, rng);
  // Row 0: only ids 10 and 20 finite; row 1: NaN; row 2: +inf; row 3: all -inf;
  // row 4: greedy with NaN; row 5: bad top_p; row 6: greedy all -inf but one; row 7: fine.
  std::fill(l.begin(), l.begin() + vocab, -INFINITY);
  l[10] = 1.f;
  l[20] = 1.5f;
  l[size_t(1) * vocab + 4444] = NAN;
  l[size_t(2) * vocab + 17] = INFINITY;
  std::fill(l.begin() + 3 * vocab, l.begin() + 4 * vocab, -INFINITY);
  l[size_t(4) * vocab + 100] = NAN;
  std::fill(l.begin() + 6 * vocab, l.begin() + 7 * vocab, -INFINITY);
  l[size_t(6) * vocab + 8191] = -1e30f;
  std::vector<SamplingRow> rr(rows, device_rule(rule(1.0f, 0, 0.9f, 0.0f), 3));
  rr[4] = device_rule(rule(0.0f, 0, 1.0f, 0.0f), 0);
  rr[5].top_p = 0.0f;
  rr[6] = rr[4];
  const auto got = device_sample(l, vocab, rr);
  EXPECT_TRUE(got[0] == 10 || got[0] == 20) << got[0];
  EXPECT_EQ(got[1], kernels::kSampleBadLogit);
  EXPECT_EQ(got[2], kernels::kSampleBadLogit);
  EXPECT_EQ(got[3], kernels::kSampleAllMasked);
  EXPECT_EQ(got[4], kernels::kSampleBadLogit);
  EXPECT_EQ(got[5], kernels::kSampleBadParams);
  EXPECT_EQ(got[6], 8191);
  TokenDistribution d;
  SamplingParams p7 = rule(1.0f, 0, 0.9f, 0.0f);
  EXPECT_EQ(got[7], host_token(l.data() + size_t(7) * vocab, vocab, p7, 3, &d));
  // Row 0 over many counters: only the two finite ids, at the host's odds.
  std::vector<float> two(l.begin(), l.begin() + vocab), many;
  std::vector<SamplingRow> r0;
  for (int i = 0; i < 256; ++i) {
    many.insert(many.end(), two.begin(), two.end());
    r0.push_back(device_rule(rule(1.0f, 0, 1.0f, 0.0f), i));
  }
  const auto g0 = device_sample(many, vocab, r0);
  for (int i = 0; i < 256; ++i)
    ASSERT_EQ(g0[i], host_token(two.data(), vocab, rule(1.0f, 0, 1.0f, 0.0f), i, &d)) << i;
  std::printf("[sampling] masked/NaN/+inf/all-masked/bad-params rows: errors as expected\n");
  EXPECT_EQ(kernels::sample(kernels::SampleParams{nullptr, nullptr, nullptr, 3, vocab}, nullptr),
            cudaErrorInvalidValue);
}

// Penalties on the device: apply_penalties edits the logits bit-exactly as
// the host's penalised_logits, then sample() picks the host's token (greedy
// rows included) for the same history.
TEST_F(Sampling, PenaltiesMatchHost) {
  const int vocab = 151936, rows = 24;
  const auto clean = make_logits("llm", rows, vocab, rng);
  std::vector<SamplingParams> ps;
  std::vector<std::vector<int32_t>> hist;
  std::vector<SamplingRow> rr;
  std::vector<kernels::PenaltyEdit> edits;
  for (int i = 0; i < rows; ++i) {
    SamplingParams p = rules()[size_t(i) % rules().size()].p;
    p.repetition_penalty = i % 3 == 0 ? 1.0f : 1.1f + 0.05f * (i % 4);
    p.presence_penalty = i % 3 == 1 ? 0.0f : 0.3f;
    p.frequency_penalty = i % 2 ? 0.25f : -0.1f;
    p.penalty_last_n = i % 4 == 0 ? -1 : 16 + i;
    p.seed = 1000 + i;
    ps.push_back(p);
    // Histories that repeat the likeliest tokens, so the penalties matter.
    std::vector<int32_t> h;
    const float *row = clean.data() + size_t(i) * vocab;
    const int32_t top = argmax(row, vocab);
    for (int t = 0; t < 40 + 7 * i; ++t)
      h.push_back(t % 3 == 0 ? top : int32_t(rng() % 64 == 0 ? rng() % vocab : rng() % 50));
    hist.push_back(h);
    SamplingRow r = device_rule(p, 77 + i);
    r.repetition_penalty = p.repetition_penalty;
    r.presence_penalty = p.presence_penalty;
    r.frequency_penalty = p.frequency_penalty;
    rr.push_back(r);
    std::vector<std::pair<int32_t, int32_t>> counts;
    penalty_counts(h.data(), h.size(), vocab, p, &counts);
    for (const auto &c : counts) edits.push_back(kernels::PenaltyEdit{i, c.first, c.second});
  }
  Dev<float> dl(clean);
  Dev<SamplingRow> dr(rr);
  Dev<kernels::PenaltyEdit> de(edits);
  Dev<int32_t> out(static_cast<size_t>(rows), 0x7f);
  kernels::PenaltyParams pp{dl.get(), dr.get(), de.get(), int32_t(edits.size()), rows, vocab};
  CUDA_OK(kernels::apply_penalties(pp, nullptr));
  kernels::SampleParams sp{dl.get(), dr.get(), out.get(), rows, vocab};
  CUDA_OK(kernels::sample(sp, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto penalised = dl.download();
  const auto got = out.download();
  int exact_rows = 0, same = 0;
  for (int i = 0; i < rows; ++i) {
    const float *row = clean.data() + size_t(i) * vocab;
    std::vector<std::pair<int32_t, float>> want_edits;
    penalised_logits(row, vocab, ps[i], hist[i], &want_edits);
    std::vector<float> want(row, row + vocab);
    for (const auto &e : want_edits) want[size_t(e.first)] = e.second;
    const bool exact = std::equal(want.begin(), want.end(), penalised.begin() + size_t(i) * vocab);
    EXPECT_TRUE(exact) << "row " << i << ": penalised logits differ from the host's";
    exact_rows += exact;
    TokenDistribution d;
    build_distribution(row, vocab, ps[i], hist[i], &d);
    const int32_t host =
        ps[i].greedy() ? d.ids[0] : sample_from(d, host_uniform(ps[i], rr[i].counter));
    EXPECT_EQ(got[i], host) << "row " << i;
    same += got[i] == host;
  }
  std::printf("[sampling] penalties rows=%d edits=%zu bit-exact logit rows=%d same token=%d\n",
              rows, edits.size(), exact_rows, same);
}

// Micro-benchmark: µs per step (one launch over all rows), median of 50.
TEST_F(Sampling, Benchmark) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  auto time_us = [&](const std::function<void()> &op) {
    for (int i = 0; i < 3; ++i) op();
    std::vector<float> t;
    for (int i = 0; i < 50; ++i) {
      cudaEventRecord(a, s);
      op();
      cudaEventRecord(b, s);
      cudaEventSynchronize(b);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    return double(t[t.size() / 2]);
  };
  for (int vocab : {8192, 151936}) {
    for (int rows : {16, 64}) {
      const auto logits = make_logits("llm", rows, vocab, rng);
      Dev<float> dl(logits);
      Dev<int32_t> out(static_cast<size_t>(rows));
      kernels::ArgmaxParams ap{dl.get(), out.get(), rows, vocab};
      std::printf("[sampling] bench vocab=%d rows=%d argmax_kernel_us=%.1f\n", vocab, rows,
                  time_us([&] { kernels::argmax(ap, s); }));
      for (const Rule &r : rules()) {
        std::vector<SamplingRow> rr;
        for (int i = 0; i < rows; ++i) rr.push_back(device_rule(r.p, i));
        Dev<SamplingRow> dr(rr);
        kernels::SampleParams sp{dl.get(), dr.get(), out.get(), rows, vocab};
        const double us = time_us([&] { kernels::sample(sp, s); });
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        std::printf("[sampling] bench vocab=%d rows=%d rule=%s us_per_step=%.1f\n", vocab, rows,
                    r.name, us);
      }
    }
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace vegas::test
