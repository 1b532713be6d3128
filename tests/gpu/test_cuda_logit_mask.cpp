// tests/unit/test_tokenizer_vocab_gap.cpp on the CUDA backend: the logits of
// ids past the tokenizer are masked on the device (kernels/mask_logits.cu), so
// neither the host's draws nor the device's (draft chains, candidates) pick one.
#include <gtest/gtest.h>

#include "../unit/vocab_gap_model.h"
#include "gpu_test_util.h"

namespace vegas {
namespace {

std::shared_ptr<Model> gap_model() {
  static std::shared_ptr<Model> model = [] {
    ModelLoadOptions o;
    o.backend_auto = false;
    o.backend = BackendKind::kCuda;
    return Model::load(test::vocab_gap_model_dir(16), o);  // head_dim 16: a CUDA one
  }();
  return model;
}

class CudaLogitMask : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(CudaLogitMask, VanillaDrawsOnlyDecodableIds) {
  test::expect_only_decodable_ids(gap_model(), false);
}

TEST_F(CudaLogitMask, VegasDrawsOnlyDecodableIds) {
  test::expect_only_decodable_ids(gap_model(), true);
}

TEST_F(CudaLogitMask, BackendMasksLogitsPastTheTokenizer) {
  test::expect_masked_logits(*gap_model());
}

}  // namespace
}  // namespace vegas
