// The host's share of a speculative round's sampling, per logit row: building
// a processed distribution from the whole row (what the host did for every
// draft and verify row) against building it from the row's candidates (what
// it does when the backend sends only those, BackendContext::forward_candidates),
// and cutting a row down on the host (the fallback). Rows are Zipf-like, as a
// language model's, at the embedded model's and at Qwen3's vocabulary size;
// the rule is the Vegas benchmark's (T 0.6, top-k 20, top-p 0.95).
// Run: build/bin/bench_sampling_host
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "sampling/sampling.h"
#include "sampling_bench_data.h"

namespace {

using vegas::LogitCandidates;
using vegas::SamplingParams;
using vegas::TokenDistribution;

constexpr int kRows = 64;  // distinct rows cycled through, so no row stays in L1

std::vector<float> llm_rows(int vocab) {
  std::mt19937 rng(5);
  std::vector<float> l(static_cast<size_t>(kRows) * vocab);
  for (int r = 0; r < kRows; ++r)
    vegas::bench::llm_row(l.data() + static_cast<size_t>(r) * vocab, vocab, 0.3f, rng);
  return l;
}

void WholeRow(benchmark::State &state) {
  const int vocab = static_cast<int>(state.range(0));
  const std::vector<float> l = llm_rows(vocab);
  const SamplingParams p = vegas::bench::vegas_bench_rule();
  const std::vector<int32_t> no_history;
  TokenDistribution d;
  int r = 0;
  for (auto _ : state) {
    vegas::build_distribution(l.data() + static_cast<size_t>(r) * vocab, vocab, p, no_history, &d);
    benchmark::DoNotOptimize(d.probs.data());
    r = (r + 1) % kRows;
  }
}

void FromCandidates(benchmark::State &state) {
  const int vocab = static_cast<int>(state.range(0));
  const std::vector<float> l = llm_rows(vocab);
  const SamplingParams p = vegas::bench::vegas_bench_rule();
  std::vector<LogitCandidates> c(kRows);
  for (int r = 0; r < kRows; ++r)
    vegas::extract_candidates(l.data() + static_cast<size_t>(r) * vocab, vocab, p.top_k, &c[r]);
  TokenDistribution d;
  int r = 0;
  for (auto _ : state) {
    vegas::build_distribution_from_candidates(c[r], p, &d);
    benchmark::DoNotOptimize(d.probs.data());
    r = (r + 1) % kRows;
  }
}

void ExtractOnHost(benchmark::State &state) {
  const int vocab = static_cast<int>(state.range(0));
  const std::vector<float> l = llm_rows(vocab);
  LogitCandidates c;
  int r = 0;
  for (auto _ : state) {
    vegas::extract_candidates(l.data() + static_cast<size_t>(r) * vocab, vocab, 20, &c);
    benchmark::DoNotOptimize(c.ids.data());
    r = (r + 1) % kRows;
  }
}

BENCHMARK(WholeRow)->Arg(8192)->Arg(151936)->Unit(benchmark::kMicrosecond);
BENCHMARK(FromCandidates)->Arg(8192)->Arg(151936)->Unit(benchmark::kMicrosecond);
BENCHMARK(ExtractOnHost)->Arg(8192)->Arg(151936)->Unit(benchmark::kMicrosecond);

}  // namespace
