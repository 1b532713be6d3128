// Vegas mode is lossless under greedy decoding (issue P0-4, "Must show" 1, 4):
// on the embedded model and every public 2K prompt (8K and 16K in the longer
// run, VEGAS_LOSSLESS_LONG=1), the first 64 tokens of
// speculative decoding equal plain (vanilla) decoding for every selection
// policy, while the sparse policies really do draft from a subset (some drafts
// get rejected), and the statistics the ABI reports add up.
//
// Budget (2 CPU cores): the vanilla reference runs through a real Session (one
// 2K prefill per prompt); all policies share one more prefill per prompt
// through SharedPrefixRunner. The whole binary takes about a minute.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "session/session.h"
#include "speculative_harness.h"
#include "speculative_test_data.h"
#include "support/session_run.h"

namespace vegas {
namespace {

constexpr int32_t kNewTokens = 64;

std::shared_ptr<Model> &shared_model() {
  return test::shared_cpu_model(test::embedded_model_dir());
}

// Plain decoding through a Session: the reference.
std::vector<int32_t> vanilla_tokens(const std::vector<int32_t> &prompt, int32_t max_tokens,
                                    bool kv_fp8 = false) {
  SessionParams sp;
  sp.kv_fp8 = kv_fp8;
  return test::session_tokens(shared_model(), sp, prompt, max_tokens);
}

// A user policy through the C vtable: the candidates whose score is at least
// the mean score (a sparse set driven by the scores the library hands over).
struct AboveMean {
  int32_t calls = 0;
  int32_t destroyed = 0;
};

int32_t above_mean_select(const vegas_select_input *in, int32_t *out, int32_t capacity,
                          void *user_data) {
  auto *self = static_cast<AboveMean *>(user_data);
  self->calls += 1;
  if (capacity < in->n_candidates) return VEGAS_ERR_BUFFER_TOO_SMALL;
  double sum = 0.0;
  for (int32_t i = 0; i < in->n_candidates; ++i) sum += in->scores[i];
  const double mean = in->n_candidates > 0 ? sum / in->n_candidates : 0.0;
  int32_t count = 0;
  for (int32_t i = 0; i < in->n_candidates; ++i)
    if (in->scores[i] >= mean) out[count++] = i;
  return count;
}

void above_mean_destroy(void *user_data) {
  static_cast<AboveMean *>(user_data)->destroyed += 1;
}

const std::vector<std::string> kPolicies = {"vegas",  "vegas-all",   "specextend", "streaming",
                                            "quest",  "topp",        "full",       "user",
                                            "lookup", "vegas+lookup"};

// Every policy's greedy tokens equal vanilla's on the public prompts whose id
// ends in `suffix` (those of index i with i % n_shards == shard), and every
// sparse policy rejected some draft.
void check_every_policy(const std::string &suffix, size_t shard = 0, size_t n_shards = 1) {
  const auto all = test::load_public_prompts(shared_model()->tokenizer(), suffix);
  ASSERT_GE(all.size(), 8u);
  std::vector<test::TokenizedPrompt> prompts;
  for (size_t i = shard; i < all.size(); i += n_shards) prompts.push_back(all[i]);
  std::vector<int64_t> rejected(kPolicies.size(), 0), drafted(kPolicies.size(), 0),
      rounds(kPolicies.size(), 0);
  for (const auto &prompt : prompts) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> reference = vanilla_tokens(prompt.ids, kNewTokens);
    ASSERT_EQ(reference.size(), static_cast<size_t>(kNewTokens));
    test::SharedPrefixRunner runner(*shared_model(), prompt.ids, kNewTokens);
    for (size_t p = 0; p < kPolicies.size(); ++p) {
      AboveMean user_state;
      vegas_select_policy user{};
      user.struct_size = sizeof(user);
      user.user_data = &user_state;
      user.select = above_mean_select;
      user.destroy = above_mean_destroy;
      SpeculativeParams params;
      params.policy = kPolicies[p];
      params.gamma = 6;
      params.selection.user = &user;
      const test::SpeculativeRun run = runner.run(params, SamplingParams{}, kNewTokens);
      EXPECT_EQ(run.generated, reference) << prompt.id << " policy " << kPolicies[p];
      // Every round drafts (gamma capped by the tokens left), and the counters add up.
      EXPECT_GT(run.stats.rounds, 0);
      EXPECT_EQ(run.stats.committed, kNewTokens - 1);  // the first token comes from prefill
      EXPECT_EQ(run.stats.committed, run.stats.accepted + run.stats.rounds);
      rejected[p] += run.stats.drafted - run.stats.accepted;
      drafted[p] += run.stats.drafted;
      rounds[p] += run.stats.rounds;
      if (kPolicies[p] == "full") {
        EXPECT_EQ(run.stats.accepted, run.stats.drafted) << prompt.id << ": full must accept all";
      }
      if (kPolicies[p] == "user") {
        // One select per layer after prefill and after every round but the
        // last (which ends the sequence); destroy exactly once.
        EXPECT_EQ(user_state.calls, run.stats.rounds * shared_model()->config().n_layers);
        EXPECT_EQ(user_state.destroyed, 1);
      }
    }
    std::printf("[ %s ] %zu tokens, vanilla + %zu policies in %.1f s\n", prompt.id.c_str(),
                prompt.ids.size(), kPolicies.size(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // The sparse policies must really have drafted from a subset: otherwise the
  // equality above would prove nothing about sparse drafting.
  for (size_t p = 0; p < kPolicies.size(); ++p) {
    std::printf(
        "[ %-10s ] greedy tau %.2f (%lld rounds, %lld of %lld drafts rejected)\n",
        kPolicies[p].c_str(),
        static_cast<double>(drafted[p] - rejected[p] + rounds[p]) / static_cast<double>(rounds[p]),
        static_cast<long long>(rounds[p]), static_cast<long long>(rejected[p]),
        static_cast<long long>(drafted[p]));
    if (kPolicies[p] == "full") continue;
    EXPECT_GT(rejected[p], 0) << kPolicies[p] << " never rejected a draft over all prompts";
  }
}

// In four shards of the prompts, which ctest runs as separate tests: on the
// 2-core CI machine the whole check was one test of ~4.5 minutes beside an
// idle core.
constexpr size_t kShards = 4;
class SpeculativeLosslessShard : public ::testing::TestWithParam<size_t> {};

TEST_P(SpeculativeLosslessShard, GreedyEqualsVanillaOnPublic2kPromptsForEveryPolicy) {
  if (!test::have_model_and_prompts()) GTEST_SKIP() << "embedded model or public prompts absent";
  check_every_policy("-2k", GetParam(), kShards);
}
INSTANTIATE_TEST_SUITE_P(Prompts, SpeculativeLosslessShard, ::testing::Range<size_t>(0, kShards));

// The longer run of the same check on the 8K and 16K public prompts (about
// an hour on two cores, so not in CI): VEGAS_LOSSLESS_LONG=1 runs it.
TEST(SpeculativeLossless, GreedyEqualsVanillaOnLongPublicPromptsForEveryPolicy) {
  const char *env = std::getenv("VEGAS_LOSSLESS_LONG");
  if (env == nullptr || std::string(env) != "1")
    GTEST_SKIP() << "the 8K and 16K prompts run with VEGAS_LOSSLESS_LONG=1 (too long for CI)";
  if (!test::have_model_and_prompts()) GTEST_SKIP() << "embedded model or public prompts absent";
  for (const char *suffix : {"-8k", "-16k"}) check_every_policy(suffix);
}

// With the fp8 KV cache (VEGAS_KV_FP8; the CPU rounds its cache to the fp8
// values) Vegas stays lossless against vanilla of the same cache, for the
// policies that read the cache in different ways (scores, streaming windows,
// quest's page bounds, full verification). That the CPU really rounds its
// cache is test_cpu_backend's (Fp8KvCacheRoundsTheStoredValues).
class Fp8LosslessShard : public ::testing::TestWithParam<size_t> {};

TEST_P(Fp8LosslessShard, GreedyEqualsVanillaWithTheFp8KvCache) {
  if (!test::have_model_and_prompts()) GTEST_SKIP() << "embedded model or public prompts absent";
  const auto all = test::load_public_prompts(shared_model()->tokenizer(), "-2k");
  ASSERT_GE(all.size(), 4u);
  int64_t differs_from_default = 0, rejected = 0;
  for (size_t i = GetParam(); i < all.size(); i += 2) {
    const auto &prompt = all[i];
    const std::vector<int32_t> reference = vanilla_tokens(prompt.ids, kNewTokens, true);
    differs_from_default += reference != vanilla_tokens(prompt.ids, kNewTokens, false);
    test::SharedPrefixRunner runner(*shared_model(), prompt.ids, kNewTokens, 8, 512, true);
    for (const char *policy : {"vegas", "streaming", "quest", "full"}) {
      SpeculativeParams params;
      params.policy = policy;
      params.gamma = 6;
      const test::SpeculativeRun run = runner.run(params, SamplingParams{}, kNewTokens);
      EXPECT_EQ(run.generated, reference) << prompt.id << " policy " << policy;
      rejected += run.stats.drafted - run.stats.accepted;
    }
  }
  EXPECT_GT(rejected, 0) << "no sparse draft was ever rejected";
  std::printf("[ fp8 KV ] greedy output differs from the f32 cache's on %lld prompts\n",
              static_cast<long long>(differs_from_default));
}
INSTANTIATE_TEST_SUITE_P(Prompts, Fp8LosslessShard, ::testing::Range<size_t>(0, 2));

}  // namespace
}  // namespace vegas
