// The host's share of a decode step: the embedded model's session (batch
// building, KV reservations, commits with detokenizing and stop checks, and
// in Vegas mode the decoder's draft distributions, acceptance and
// bookkeeping) against a backend that computes nothing and answers at once.
// On a GPU this work sits between device steps unless it overlaps them, so it
// bounds how close a session's step gets to the device's. One iteration is
// one Session::step (vanilla: one token per sequence; vegas: one round).
// Run: build/bin/bench_session_host
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "../unit/support/model_dir.h"
#include "model/model.h"
#include "sampling/sampling.h"
#include "sampling_bench_data.h"
#include "session/session.h"

namespace {

using namespace vegas;

constexpr int32_t kBatch = 16;
constexpr int32_t kContext = 2048;
constexpr int32_t kMaxTokens = 20000;  // more than any run here steps

// Every logit row is the same Zipf-like row over a shuffled vocabulary, so a
// sampling rule keeps a realistic handful of tokens and drafts are accepted.
class NullContext final : public BackendContext {
 public:
  // picks_candidates: answer forward_candidates (as a backend that picks them
  // on the device) or decline it (the host cuts the returned rows down).
  NullContext(int32_t vocab, bool picks_candidates)
      : vocab_(vocab), picks_(picks_candidates), row_(static_cast<size_t>(vocab)) {
    std::mt19937 rng(3);
    top_ = vegas::bench::llm_row(row_.data(), vocab, 0.0f, rng);
  }
  const float *forward(const ForwardBatch &batch) override {
    const size_t rows = static_cast<size_t>(batch.logit_rows());
    if (logits_.size() < rows * vocab_) {
      logits_.resize(rows * vocab_);
      for (size_t r = 0; r < rows; ++r)
        std::copy(row_.begin(), row_.end(), logits_.begin() + r * vocab_);
    }
    return logits_.data();
  }
  bool forward_sample(const ForwardBatch &batch, const RowSampling *, int32_t *out) override {
    std::fill(out, out + batch.logit_rows(), top_);
    return true;
  }
  bool forward_candidates(const ForwardBatch &batch, const int32_t *k,
                          std::vector<LogitCandidates> *out) override {
    if (!picks_) return false;
    out->resize(static_cast<size_t>(batch.logit_rows()));
    for (size_t i = 0; i < out->size(); ++i) {
      LogitCandidates &c = cand_of_k_[k[i]];
      if (c.ids.empty()) extract_candidates(row_.data(), vocab_, k[i], &c);
      (*out)[i] = c;
    }
    return true;
  }
  bool device_selection() const override { return true; }  // selection costs the host nothing

 private:
  int32_t vocab_;
  bool picks_;
  std::vector<float> row_, logits_;
  int32_t top_ = 0;
  std::vector<LogitCandidates> cand_of_k_ = std::vector<LogitCandidates>(kMaxCandidateTopK + 1);
};

class NullBackend final : public BackendModel {
 public:
  explicit NullBackend(const ModelConfig &c) : config_(c) {}
  static bool picks_candidates;  // for the contexts made next
  BackendKind kind() const override { return BackendKind::kCuda; }
  const ModelConfig &config() const override { return config_; }
  uint64_t weight_bytes() const override { return 0; }
  uint64_t kv_bytes_per_token(bool) const override { return 64; }
  std::unique_ptr<BackendContext> create_context(const ContextParams &) override {
    return std::make_unique<NullContext>(config_.vocab_size, picks_candidates);
  }
  double measure_copy_bandwidth() const override { return 1.0; }

 private:
  ModelConfig config_;
};

bool NullBackend::picks_candidates = true;

std::shared_ptr<Model> null_model() {
  static std::shared_ptr<Model> model = [] {
    ModelLoadOptions o;
    o.make_backend = [](const ModelConfig &c, const ModelWeights &) {
      return std::unique_ptr<BackendModel>(new NullBackend(c));
    };
    return Model::load(vegas::test::embedded_model_dir(), o);
  }();
  return model;
}

// kBatch sequences of kContext random prompt tokens, prefilled.
std::unique_ptr<Session> decoding_session(const SessionParams &params, const SamplingParams &rule) {
  auto session = std::make_unique<Session>(null_model(), params);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> tok(100, null_model()->config().vocab_size - 1);
  for (int32_t i = 0; i < kBatch; ++i) {
    SequenceRequest req;
    for (int32_t t = 0; t < kContext; ++t) req.prompt.push_back(tok(rng));
    req.sampling = rule;
    req.sampling.seed = static_cast<uint64_t>(i);
    req.max_tokens = kMaxTokens;
    req.ignore_eos = true;
    session->submit(std::move(req));
  }
  while (true) {  // prefill: until every sequence has its first token
    session->step();
    bool all = true;
    for (int32_t id = 0; id < kBatch; ++id) all = all && session->sequence(id).n_generated() > 0;
    if (all) break;
  }
  return session;
}

SessionParams params_for(bool vegas, const char *policy = "vegas") {
  SessionParams p;
  p.max_batch = kBatch;
  p.prefill_chunk = 2048;
  p.prefill_first = true;
  p.kv_bytes = uint64_t{64} * kBatch * (kContext + kMaxTokens + 64) * 2;
  p.speculative = vegas;
  p.spec.policy = policy;
  p.spec.gamma = 6;
  p.spec.selection.ratio = 0.07f;
  p.spec.selection.window_share = 0.5f;
  return p;
}

// picks: whether the backend picks logit candidates (else the host cuts the
// vocabulary rows down, as on a backend without forward_candidates).
// policy: "lookup" drafts from the context, where the backend's one token,
// repeated, always continues what came before (every draft found).
void Step(benchmark::State &state, bool vegas, bool sampling, bool picks = true,
          const char *policy = "vegas") {
  NullBackend::picks_candidates = picks;
  auto session = decoding_session(params_for(vegas, policy),
                                  sampling ? vegas::bench::vegas_bench_rule() : SamplingParams{});
  int64_t before = 0;
  for (int32_t id = 0; id < kBatch; ++id) before += session->sequence(id).n_generated();
  for (auto _ : state) session->step();
  int64_t after = 0;
  for (int32_t id = 0; id < kBatch; ++id) after += session->sequence(id).n_generated();
  state.counters["tokens_per_step"] =
      static_cast<double>(after - before) / static_cast<double>(state.iterations());
}

BENCHMARK_CAPTURE(Step, vanilla_greedy, false, false)
    ->Iterations(1000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Step, vanilla_sampled, false, true)
    ->Iterations(1000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Step, vegas_greedy, true, false)->Iterations(200)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Step, vegas_sampled, true, true)->Iterations(200)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Step, vegas_sampled_from_rows, true, true, false)
    ->Iterations(100)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Step, lookup_greedy, true, false, true, "lookup")
    ->Iterations(200)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(Step, lookup_sampled, true, true, true, "lookup")
    ->Iterations(200)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
