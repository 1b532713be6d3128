// The prefix cache through the public ABI on the CPU backend (issue: IDE
// completion latency), on the embedded model and public prompts, greedy
// (prefix_cache_checks.h):
// - a second request sharing a 4,000-token prefix with the first prefills
//   only the rest (the session's hit counter) and gives exactly the tokens it
//   gives in a session without the cache, in vanilla and in VEGAS mode (the
//   CUDA test, tests/gpu/test_cuda_prefix_cache.cpp, takes 7,000 tokens: a
//   7K prefill costs ~40 s on a 2-core CPU);
// - in a pool too small to keep everything, new sequences take cached pages
//   back (evictions) but never the pages a running sequence shares, whose
//   tokens stay those of a session without the cache;
// - prefix_cache 0 turns it off, and other values are refused.
#include <gtest/gtest.h>

#include <memory>

#include "prefix_cache_checks.h"
#include "support/abi_model.h"

namespace vegas {
namespace {

class PrefixCache : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_model_and_prompts()) GTEST_SKIP() << "embedded model or prompts absent";
    ASSERT_EQ(test::load_cpu_model(test::embedded_model_dir(), &model_), VEGAS_OK)
        << vegas_last_error();
    tokenizer_ = Tokenizer::load(test::embedded_model_dir() + "/tokenizer.json");
  }
  void TearDown() override { vegas_model_free(model_); }

  vegas_model *model_ = nullptr;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(PrefixCache, SecondRequestPrefillsOnlyTheDifference) {
  test::check_second_request(model_, *tokenizer_, 2100);  // several 512-token chunks
}

TEST_F(PrefixCache, EvictionNeverTouchesASharedPrefixInUse) {
  test::check_eviction(model_, *tokenizer_);
}

TEST_F(PrefixCache, OffMeansNoHitsAndBadValuesAreRefused) {
  test::check_off_and_bad_values(model_, *tokenizer_);
}

}  // namespace
}  // namespace vegas
