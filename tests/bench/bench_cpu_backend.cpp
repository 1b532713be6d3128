// Throughput of the CPU reference backend on the embedded model: decode
// tokens/s at batch 1 and 8 with 2K tokens of context already in the KV
// cache, and prefill tokens/s of a 2K prompt (512-row chunks).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../unit/support/model_dir.h"
#include "backend/backend.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/weight_store.h"

namespace vegas {
namespace {

constexpr int32_t kPageSize = 16;
constexpr int32_t kChunk = 512;
constexpr int kDecodeSteps = 32;

struct Loaded {
  ModelConfig config;
  std::unique_ptr<WeightStore> store;
  std::unique_ptr<BackendModel> backend;
};

Loaded &model() {
  static Loaded m = [] {
    const std::string dir = test::embedded_model_dir();
    Loaded l;
    l.config = load_model_config(dir + "/config.json");
    l.store = WeightStore::open(dir);
    l.backend = create_cpu_backend(l.config, bind_model_weights(l.config, *l.store), {});
    return l;
  }();
  return m;
}

struct Sequence {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pages;
};

// n sequences of `length` random tokens with disjoint page tables.
std::vector<Sequence> make_sequences(int n, int32_t length, int32_t vocab) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> u(0, vocab - 1);
  const int32_t pages = (length + kPageSize - 1) / kPageSize;
  std::vector<Sequence> seqs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    for (int32_t t = 0; t < length; ++t) seqs[i].tokens.push_back(u(rng));
    for (int32_t p = 0; p < pages; ++p) seqs[i].pages.push_back(i * pages + p);
  }
  return seqs;
}

SeqRows rows_of(const Sequence &s, int32_t from, int32_t n, SeqRows::Logits logits) {
  SeqRows r;
  r.tokens = s.tokens.data() + from;
  r.n_tokens = n;
  r.start_pos = from;
  r.page_table = s.pages.data();
  r.n_pages = static_cast<int32_t>(s.pages.size());
  r.logits = logits;
  return r;
}

void prefill(BackendContext &ctx, const Sequence &s, int32_t length) {
  for (int32_t from = 0; from < length; from += kChunk) {
    ForwardBatch b;
    const int32_t n = std::min(kChunk, length - from);
    b.seqs.push_back(rows_of(s, from, n, SeqRows::Logits::kLast));
    ctx.forward(b);
  }
}

// Decode steps of `batch` sequences, each with `context` tokens already cached.
void BM_Decode(benchmark::State &state) {
  const int batch = static_cast<int>(state.range(0));
  const int32_t context = static_cast<int32_t>(state.range(1));
  Loaded &m = model();
  const int32_t length = context + kDecodeSteps;
  std::vector<Sequence> seqs = make_sequences(batch, length, m.config.vocab_size);
  ContextParams p;
  p.page_size = kPageSize;
  p.num_pages = batch * static_cast<int32_t>(seqs[0].pages.size());
  p.max_rows = kChunk;
  auto ctx = m.backend->create_context(p);
  for (const Sequence &s : seqs) prefill(*ctx, s, context);

  int32_t pos = context;
  for (auto _ : state) {
    ForwardBatch b;
    for (const Sequence &s : seqs) b.seqs.push_back(rows_of(s, pos, 1, SeqRows::Logits::kLast));
    benchmark::DoNotOptimize(ctx->forward(b));
    ++pos;
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(batch) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Decode)
    ->Args({1, 2048})
    ->Args({8, 2048})
    ->Iterations(kDecodeSteps)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Prefill of one `length`-token prompt in 512-row chunks.
void BM_Prefill(benchmark::State &state) {
  const int32_t length = static_cast<int32_t>(state.range(0));
  Loaded &m = model();
  std::vector<Sequence> seqs = make_sequences(1, length, m.config.vocab_size);
  ContextParams p;
  p.page_size = kPageSize;
  p.num_pages = static_cast<int32_t>(seqs[0].pages.size());
  p.max_rows = kChunk;
  auto ctx = m.backend->create_context(p);
  for (auto _ : state) prefill(*ctx, seqs[0], length);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(length) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Prefill)->Arg(2048)->Iterations(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace vegas
