// Token logprobs on the CUDA backend (label `gpu`): the CPU test's checks
// (tests/unit/logprobs_checks.h) on a 2K public prompt. A logprobs sequence
// takes the whole-row paths (no device sampling in vanilla steps, no logit
// candidates in its rounds), which these runs exercise on the device.
#include <gtest/gtest.h>

#include <memory>

#include "../unit/logprobs_checks.h"
#include "../unit/speculative_test_data.h"

namespace vegas {
namespace {

// Activations are bf16 between layers, and a decode step and a prefill chunk
// round differently (other kernels, other GEMM shapes): logits differ by a
// few bf16 ulps. A wrong row differs by whole units.
constexpr float kCudaTolerance = 0.1f;

class CudaLogprobs : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_model_and_prompts()) GTEST_SKIP() << "embedded model or prompts absent";
    ModelLoadOptions options;
    options.backend_auto = false;
    options.backend = BackendKind::kCuda;
    model_ = Model::load(test::embedded_model_dir(), options);
    const auto prompts = test::load_public_prompts(model_->tokenizer(), "-2k");
    ASSERT_FALSE(prompts.empty());
    prompt_ = prompts.front().ids;
  }

  std::shared_ptr<Model> model_;
  std::vector<int32_t> prompt_;
};

TEST_F(CudaLogprobs, VanillaMatchesAPrefillOfTheText) {
  test::check_vanilla_logprobs(model_, prompt_, 16, kCudaTolerance);
}

TEST_F(CudaLogprobs, SpeculativeUsesTheDecidingVerifyRow) {
  test::check_speculative_logprobs(model_, prompt_, 16, kCudaTolerance, /*exact_greedy=*/false);
}

}  // namespace
}  // namespace vegas
