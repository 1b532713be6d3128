// The CPU backend keeps bf16 weight matrices as bf16. What it proves: the
// matrix product with bf16 weights gives the same bits as with the same
// weights widened to f32 (odd shapes included: tails of the 8-lane loop and
// of the 4 x 4 blocks, one and many rows), and the embedded bf16 model takes
// about its file's size in memory instead of twice it.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend_model.h"
#include "backend/cpu/cpu_gemm.h"
#include "common/bf16.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/weight_store.h"
#include "support/model_dir.h"

namespace vegas {
namespace {

TEST(CpuMatmul, Bf16WeightsGiveTheBitsOfTheirF32Widening) {
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape s : {Shape{1, 16, 64}, Shape{1, 37, 29}, Shape{5, 21, 130}, Shape{130, 9, 512},
                        Shape{3, 4, 7}}) {
    std::vector<float> x(static_cast<size_t>(s.m * s.k)), bias(static_cast<size_t>(s.n));
    for (float &v : x) v = gauss(rng);
    for (float &v : bias) v = gauss(rng);
    CpuMatrix half, wide;
    for (int64_t i = 0; i < s.n * s.k; ++i) {
      half.bf16.push_back(f32_to_bf16(gauss(rng)));
      wide.f32.push_back(bf16_to_f32(half.bf16.back()));
    }
    const float *no_bias = nullptr;
    for (const float *b : {no_bias, static_cast<const float *>(bias.data())}) {
      std::vector<float> y1(static_cast<size_t>(s.m * s.n)), y2(y1.size());
      cpu_matmul(x.data(), s.m, half, b, s.n, s.k, y1.data(), 2);
      cpu_matmul(x.data(), s.m, wide, b, s.n, s.k, y2.data(), 2);
      EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)))
          << "m " << s.m << " n " << s.n << " k " << s.k;
    }
  }
}

TEST(CpuWeights, TheEmbeddedBf16ModelKeepsItsFileSize) {
  const std::string dir = test::embedded_model_dir();
  const ModelConfig config = load_model_config(dir + "/config.json");
  const auto store = WeightStore::open(dir);
  const ModelWeights weights = bind_model_weights(config, *store);
  const auto backend = create_cpu_backend(config, weights, CpuBackendOptions{});
  // Matrices stay bf16 (2 bytes a value); the norms become f32 (a few KB).
  const uint64_t file_bytes = store->total_bytes();
  EXPECT_LT(backend->weight_bytes(), file_bytes + file_bytes / 50);
  EXPECT_GT(backend->weight_bytes(), file_bytes * 9 / 10);
}

}  // namespace
}  // namespace vegas
