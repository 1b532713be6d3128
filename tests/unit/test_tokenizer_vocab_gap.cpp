// A model whose embedding has more rows than its tokenizer has tokens (normal
// for Qwen2.5/3). Ids past the tokenizer cannot be decoded; before they were
// masked, a sampled one threw TOKEN_OUT_OF_RANGE out of the session step and
// failed every sequence of the batch (the two generation tests fail without
// the mask: checked). CPU backend; tests/gpu/test_cuda_logit_mask.cpp runs the
// same on CUDA.
#include <gtest/gtest.h>

#include "vocab_gap_model.h"

namespace vegas {
namespace {

std::shared_ptr<Model> gap_model() {
  static std::shared_ptr<Model> model = [] {
    ModelLoadOptions o;
    o.backend_auto = false;
    o.n_threads = 1;
    return Model::load(test::vocab_gap_model_dir(8), o);
  }();
  return model;
}

TEST(TokenizerVocabGap, VanillaDrawsOnlyDecodableIds) {
  test::expect_only_decodable_ids(gap_model(), false);
}

TEST(TokenizerVocabGap, VegasDrawsOnlyDecodableIds) {
  test::expect_only_decodable_ids(gap_model(), true);
}

TEST(TokenizerVocabGap, BackendMasksLogitsPastTheTokenizer) {
  test::expect_masked_logits(*gap_model());
}

}  // namespace
}  // namespace vegas
