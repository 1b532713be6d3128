// The prefix cache on the CUDA backend (label `gpu`): the checks of the CPU
// test (tests/unit/prefix_cache_checks.h) with a 7,000-token shared prefix.
// Greedy tokens are compared exactly with a session without the cache: the
// cached K/V are those the same kernels wrote for the same tokens, and the
// rows prefilled after them run the same kernels as in a fresh prefill.
#include <gtest/gtest.h>

#include <memory>

#include "../unit/prefix_cache_checks.h"

namespace vegas {
namespace {

class CudaPrefixCache : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_model_and_prompts()) GTEST_SKIP() << "embedded model or prompts absent";
    vegas_model_options mo;
    vegas_model_options_init(&mo);
    mo.backend = VEGAS_BACKEND_CUDA;
    ASSERT_EQ(vegas_model_load(test::embedded_model_dir().c_str(), &mo, &model_), VEGAS_OK)
        << vegas_last_error();
    tokenizer_ = Tokenizer::load(test::embedded_model_dir() + "/tokenizer.json");
  }
  void TearDown() override { vegas_model_free(model_); }

  vegas_model *model_ = nullptr;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(CudaPrefixCache, SecondRequestPrefillsOnlyTheDifference) {
  test::check_second_request(model_, *tokenizer_, 7000);
}

TEST_F(CudaPrefixCache, EvictionNeverTouchesASharedPrefixInUse) {
  test::check_eviction(model_, *tokenizer_);
}

TEST_F(CudaPrefixCache, OffMeansNoHitsAndBadValuesAreRefused) {
  test::check_off_and_bad_values(model_, *tokenizer_);
}

}  // namespace
}  // namespace vegas
