// VEGAS mode on the CUDA backend (label `gpu`): sparse drafting and score
// capture run in the CUDA paged attention. On the embedded model and the
// public 2K and 8K prompts (tests/fixtures/embedded/greedy_*.json), greedy
// speculative decoding with the policies vegas, streaming, quest, full, lookup
// and vegas+lookup must give the tokens of plain greedy decoding on the same
// backend, up to the first step that the bf16 reference or our own vanilla
// logits mark as a near tie (top1 - top2 < 0.05; there, the different batch
// shapes of verification and decoding may legitimately flip the
// argmax). The sparse policies must have rejected some drafts, which shows
// that the drafts really came from a subset of the context. The same holds
// with the fp8 KV cache, Vegas against vanilla of that cache, up to its wider
// near ties (kNearTieFp8). A separate draft model (a layer-skip draft, and
// the model as its own draft) gives vanilla's tokens as well.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "../unit/layer_skip_model.h"
#include "../unit/support/golden.h"
#include "../unit/support/session_run.h"
#include "backend/cuda/cuda_backend.h"
#include "model/model.h"
#include "session/session.h"

namespace vegas {
namespace {

using namespace golden;  // NOLINT: the fixture helpers

constexpr float kNearTie = 0.05f;  // as in test_cuda_golden.cpp
// With the fp8 KV cache: verification's and decoding's GEMMs round a token's
// K and V in bf16 a last bit apart, which e4m3 turns, for a few elements, into
// a whole fp8 step (2^-3 relative instead of bf16's 2^-8). Measured on the
// H100 (KvFp8.CudaMatchesCpuOnTheFp8Cache), logits then move about five
// times as far as bf16's, so near ties are five times as wide.
constexpr float kNearTieFp8 = 5 * kNearTie;

std::vector<int32_t> generate(const std::shared_ptr<Model> &model,
                              const std::vector<int32_t> &prompt, int32_t max_tokens,
                              const std::string &policy, SequenceStats *stats, bool kv_fp8) {
  SessionParams sp;
  sp.kv_fp8 = kv_fp8;
  sp.speculative = !policy.empty();
  sp.spec.policy = policy.empty() ? "vegas" : policy;
  sp.spec.gamma = 6;
  return test::session_tokens(model, sp, prompt, max_tokens, stats);
}

// Steps of `continuation` (greedy, from `prompt`) before the first one whose
// logits on this backend have top1 - top2 < kNearTie (kNearTieFp8 with the
// fp8 cache), replaying the tokens as decode steps.
size_t steps_before_own_near_tie(const std::vector<int32_t> &prompt,
                                 const std::vector<int32_t> &continuation, bool kv_fp8) {
  const float near_tie = kv_fp8 ? kNearTieFp8 : kNearTie;
  const auto make_cuda = [](const ModelConfig &c, const ModelWeights &w) {
    return create_cuda_backend(c, w, CudaBackendOptions{});
  };
  GoldenModel golden(model_dir(), static_cast<int32_t>(prompt.size() + continuation.size()), 512,
                     /*scatter_pages=*/false, make_cuda, kv_fp8);
  const float *logits = golden.prefill(prompt, 512);
  for (size_t step = 0; step < continuation.size(); ++step) {
    float top1 = -INFINITY, top2 = -INFINITY;
    for (int32_t v = 0; v < golden.vocab(); ++v) {
      if (logits[v] > top1) {
        top2 = top1;
        top1 = logits[v];
      } else if (logits[v] > top2) {
        top2 = logits[v];
      }
    }
    if (top1 - top2 < near_tie) return step;
    logits = golden.forward(&continuation[step], 1, SeqRows::Logits::kLast);
  }
  return continuation.size();
}

std::shared_ptr<Model> load_cuda(const std::string &dir) {
  ModelLoadOptions options;
  options.backend_auto = false;
  options.backend = BackendKind::kCuda;
  return Model::load(dir, options);
}

// A public prompt and vanilla's greedy tokens up to the first near tie, of the
// bf16 reference's or of our own logits.
struct Comparable {
  std::string id;
  std::vector<int32_t> prompt, vanilla;
};

// kv_fp8: vanilla with the fp8 KV cache (the bf16 reference's near ties still
// bound the steps compared).
std::vector<Comparable> comparable_prompts(const std::shared_ptr<Model> &model,
                                           const std::string &file, bool kv_fp8) {
  const std::string path = fixtures_dir() + "/embedded/" + file;
  EXPECT_TRUE(fs::exists(path)) << path << " is missing: run tools/make_fixtures.py";
  std::vector<Comparable> out;
  if (!fs::exists(path)) return out;
  const json prompts = read_json(path);
  for (const auto &p : prompts) {
    const std::string id = p.at("id").get<std::string>();
    const auto prompt = read_ids(p.at("prompt_ids"), path + " " + id, model->config().vocab_size);
    const auto ref = read_ids(p.at("bf16").at("ids"), path + " " + id, model->config().vocab_size);
    auto margins = read_margins(p.at("bf16").at("margins"), path + " " + id, ref.size());
    if (p.contains("f32")) {  // as in test_cuda_golden.cpp: either reference's near tie
      const auto f32 = read_margins(p.at("f32").at("margins"), path + " " + id, ref.size());
      for (size_t i = 0; i < margins.size(); ++i) margins[i] = std::min(margins[i], f32[i]);
    }
    size_t until = 0;  // steps before the first near tie
    while (until < ref.size() && margins[until] >= (kv_fp8 ? kNearTieFp8 : kNearTie)) ++until;
    if (until < 2) continue;
    auto vanilla = generate(model, prompt, static_cast<int32_t>(until), "", nullptr, kv_fp8);
    EXPECT_EQ(vanilla.size(), until) << id;
    // Our own near ties count too: where our bf16 logits have top1 - top2 below
    // kNearTie, verification's batch shape (several rows, other attention
    // splits) may round the other way than a decode step's.
    const size_t ours = steps_before_own_near_tie(prompt, vanilla, kv_fp8);
    if (ours < until)
      std::printf("[ %s ] own near tie at step %zu (reference: %zu)\n", id.c_str(), ours, until);
    // The runs generate only the steps before the first near tie, so that a
    // draft rejected past it (where verification may round the other way)
    // does not count against "full" below.
    const size_t cmp = std::min(until, ours);
    if (cmp < 2) continue;
    vanilla.resize(cmp);
    out.push_back({id, prompt, std::move(vanilla)});
  }
  EXPECT_FALSE(out.empty()) << "no prompt had a step before its first near tie";
  return out;
}

// Under VEGAS_CUDA_FAULT_CHAIN_OVERFLOW=1 every chained round drops its
// drafts (none is rejected): only the tokens are compared then.
bool chain_fault() {
  const char *fault = std::getenv("VEGAS_CUDA_FAULT_CHAIN_OVERFLOW");
  return fault != nullptr && std::string(fault) == "1";
}

void check_file(const std::string &file, bool kv_fp8 = false) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const auto model = load_cuda(model_dir());
  // "lookup" at one sequence drafts up to 10 tokens a round (wide lookup
  // rounds); "vegas+lookup" takes both drafters' rounds.
  const std::vector<std::string> policies = {"vegas", "streaming", "quest",
                                             "full",  "lookup",    "vegas+lookup"};
  std::vector<int64_t> rejected(policies.size(), 0);
  for (const Comparable &c : comparable_prompts(model, file, kv_fp8)) {
    const size_t cmp = c.vanilla.size();
    for (size_t k = 0; k < policies.size(); ++k) {
      SequenceStats st;
      const auto got =
          generate(model, c.prompt, static_cast<int32_t>(cmp), policies[k], &st, kv_fp8);
      EXPECT_EQ(got, c.vanilla) << c.id << " policy " << policies[k]
                                << ": differs from vanilla within the first " << cmp << " tokens";
      rejected[k] += st.drafted - st.accepted;
      std::printf("[ %s ] %-9s %zu tokens, %lld rounds, %lld/%lld drafts accepted\n", c.id.c_str(),
                  policies[k].c_str(), cmp, static_cast<long long>(st.rounds),
                  static_cast<long long>(st.accepted), static_cast<long long>(st.drafted));
    }
  }
  if (chain_fault()) return;
  for (size_t k = 0; k < policies.size(); ++k) {
    if (policies[k] == "full") {
      EXPECT_EQ(rejected[k], 0) << "full attention drafts must all be accepted";
    } else {
      EXPECT_GT(rejected[k], 0) << policies[k] << " never rejected a draft";
    }
  }
}

TEST(CudaVegas, GreedyEqualsVanillaOn2kPrompts) {
  check_file("greedy_2k.json");
}
TEST(CudaVegas, GreedyEqualsVanillaOn8kPrompts) {
  check_file("greedy_8k.json");
}
TEST(CudaVegas, GreedyEqualsVanillaWithTheFp8KvCache) {
  check_file("greedy_2k.json", true);
  check_file("greedy_8k.json", true);
}

// Token trees on the GPU (tree masks in the paged attention kernel, the
// accepted path moved into place on the device): greedy tree rounds of the
// policies vegas and full, trees of 2 branches over 2 levels and of 3 over 1,
// give vanilla's tokens on the public 2K prompts up to their first near tie,
// with the bf16 and the fp8 KV cache; full accepts every draft of a path
// (a tree drafts more nodes than it keeps, so drafted > accepted there too),
// vegas rejects some; sampled tree runs with one seed are reproducible.
TEST(CudaVegas, TokenTreesEqualVanillaOn2kPrompts) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const auto model = load_cuda(model_dir());
  for (const bool kv_fp8 : {false, true}) {
    const std::vector<Comparable> prompts = comparable_prompts(model, "greedy_2k.json", kv_fp8);
    for (const DraftTreeShape shape : {DraftTreeShape{2, 2}, DraftTreeShape{3, 1}}) {
      for (const char *policy : {"vegas", "full"}) {
        SessionParams sp;
        sp.kv_fp8 = kv_fp8;
        sp.speculative = true;
        sp.spec.policy = policy;
        sp.spec.gamma = 6;
        sp.spec.tree = shape;
        int64_t rounds = 0, committed = 0, kept_all = 0;
        for (const Comparable &c : prompts) {
          SequenceStats st;
          const auto got = test::session_tokens(model, sp, c.prompt,
                                                static_cast<int32_t>(c.vanilla.size()), &st);
          EXPECT_EQ(got, c.vanilla) << c.id << " policy " << policy << " tree " << shape.branches
                                    << "x" << shape.branch_depth << (kv_fp8 ? " fp8 KV" : "");
          EXPECT_EQ(st.committed, st.accepted + st.rounds) << c.id;
          EXPECT_GT(st.drafted, st.accepted) << c.id << ": a tree drafts more than it keeps";
          rounds += st.rounds, committed += st.committed;
          kept_all += st.accepted == st.rounds * 6 ? 1 : 0;
        }
        std::printf("tree %dx%d %-5s%s: %.2f tokens a round over %lld rounds\n", shape.branches,
                    shape.branch_depth, policy, kv_fp8 ? " fp8" : "",
                    static_cast<double>(committed) / std::max<int64_t>(rounds, 1),
                    static_cast<long long>(rounds));
        EXPECT_GT(rounds, 0);
        if (std::string(policy) == "vegas")
          EXPECT_LT(kept_all, static_cast<int64_t>(prompts.size())) << "vegas never rejected";
      }
    }
  }
  const std::vector<int32_t> prompt = test::fibonacci_prompt(*model);
  SamplingParams sampling;
  sampling.temperature = 0.8f;
  sampling.top_k = 40;
  sampling.seed = 11;
  SessionParams sp;
  sp.speculative = true;
  sp.spec.gamma = 6;
  sp.spec.tree = DraftTreeShape{2, 2};
  std::vector<int32_t> runs[2];
  for (auto &out : runs) {
    SequenceStats st;
    out = test::sampled_session_tokens(model, sp, prompt, 48, sampling, &st);
    EXPECT_EQ(st.committed, st.accepted + st.rounds);
    EXPECT_EQ(out.size(), 48u);
  }
  EXPECT_EQ(runs[0], runs[1]) << "sampled tree rounds with one seed differ";
}

using test::with_draft;

// A separate draft model on the GPU: a layer-skip draft (the embedded model's
// first 4 layers, with full attention and with a 256-token window, whose
// records every pass of the device chain uploads) gives vanilla's greedy
// tokens on the public 2K prompts up to their first near tie, and rejects
// some drafts.
TEST(CudaVegas, DraftModelEqualsVanillaOn2kPrompts) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const auto model = load_cuda(model_dir());
  const auto draft = load_cuda(test::layer_skip_dir(4));
  for (const int32_t window : {0, 256}) {
    int64_t drafted = 0, accepted = 0, rounds = 0, committed = 0;
    for (const Comparable &c : comparable_prompts(model, "greedy_2k.json", false)) {
      SequenceStats st;
      const auto got = test::session_tokens(model, with_draft(draft, window), c.prompt,
                                            static_cast<int32_t>(c.vanilla.size()), &st);
      EXPECT_EQ(got, c.vanilla) << c.id << " window " << window;
      drafted += st.drafted, accepted += st.accepted, rounds += st.rounds;
      committed += st.committed;
    }
    EXPECT_GT(rounds, 0);
    if (!chain_fault()) EXPECT_GT(drafted, accepted) << "window " << window;
    std::printf("4-layer draft, window %d: %lld/%lld drafts accepted, %.2f tokens a round\n",
                window, static_cast<long long>(accepted), static_cast<long long>(drafted),
                static_cast<double>(committed) / std::max<int64_t>(rounds, 1));
  }
}

// The model as its own draft on the GPU: its draft passes (decode steps) and
// the verify rows compute the same logits up to the kernels' rounding, so
// nearly every draft is accepted (a near tie may flip one), the output is
// vanilla's, and sampled runs with one seed are reproducible.
TEST(CudaVegas, TheModelAsItsOwnDraft) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const auto model = load_cuda(model_dir());
  int64_t drafted = 0, accepted = 0;
  for (const Comparable &c : comparable_prompts(model, "greedy_2k.json", false)) {
    SequenceStats st;
    const auto got = test::session_tokens(model, with_draft(model, 0), c.prompt,
                                          static_cast<int32_t>(c.vanilla.size()), &st);
    EXPECT_EQ(got, c.vanilla) << c.id;
    drafted += st.drafted, accepted += st.accepted;
  }
  if (!chain_fault()) EXPECT_GT(drafted, 0);
  EXPECT_GE(accepted, drafted * 95 / 100) << accepted << " of " << drafted << " accepted";
  const std::vector<int32_t> prompt = test::fibonacci_prompt(*model);
  SamplingParams sampling;
  sampling.temperature = 0.8f;
  sampling.top_k = 40;
  sampling.seed = 7;
  std::vector<int32_t> runs[2];
  for (auto &out : runs) {  // sampled: the chain draws on the device
    SequenceStats st;
    out = test::sampled_session_tokens(model, with_draft(model, 0), prompt, 48, sampling, &st);
    EXPECT_EQ(st.committed, st.accepted + st.rounds);
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0].size(), 48u);
}

}  // namespace
}  // namespace vegas
