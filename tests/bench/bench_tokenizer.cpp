// Tokenizer throughput on the public benchmark prompts (MB/s of UTF-8 input),
// with the word cache emptied before every pass (cold) and kept (warm), plus
// decode throughput. Run: build/bin/bench_tokenizer
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../unit/support/model_dir.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string env_or(const char *name, const std::string &fallback) {
  const char *v = std::getenv(name);
  return v ? v : fallback;
}

const std::vector<std::string> &prompts() {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> out;
    std::ifstream in(env_or("VEGAS_SHARED_DIR", VEGAS_SOURCE_DIR "/../shared") +
                     "/bench/prompts-public.jsonl");
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
    return out;
  }();
  return texts;
}

const vegas::Tokenizer &tokenizer() {
  static const auto tok = vegas::Tokenizer::load(vegas::test::embedded_model_dir());
  return *tok;
}

int64_t total_bytes() {
  int64_t n = 0;
  for (const auto &p : prompts()) n += static_cast<int64_t>(p.size());
  return n;
}

void encode_all(benchmark::State &state, bool cold) {
  const vegas::Tokenizer &tok = tokenizer();
  if (prompts().empty()) {
    state.SkipWithError("no prompts (set VEGAS_SHARED_DIR)");
    return;
  }
  size_t tokens = 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      tok.clear_cache();
      state.ResumeTiming();
    }
    for (const auto &p : prompts()) {
      const auto ids = tok.encode(p, true, false);
      tokens += ids.size();
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(state.iterations() * total_bytes());
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

void BM_EncodeCold(benchmark::State &state) {
  encode_all(state, true);
}
void BM_EncodeWarm(benchmark::State &state) {
  encode_all(state, false);
}

void BM_Decode(benchmark::State &state) {
  const vegas::Tokenizer &tok = tokenizer();
  std::vector<std::vector<int32_t>> ids;
  for (const auto &p : prompts()) ids.push_back(tok.encode(p, true, false));
  for (auto _ : state)
    for (const auto &v : ids) benchmark::DoNotOptimize(tok.decode(v.data(), v.size(), false));
  state.SetBytesProcessed(state.iterations() * total_bytes());
}

BENCHMARK(BM_EncodeCold)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeWarm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

}  // namespace
