// The host-safety contract of vegas.h on the CUDA backend (label `gpu`),
// through the C ABI as a host program uses it:
// - one CUDA model shared by several sessions generating at once on several
//   threads gives each request exactly the tokens it gets alone;
// - vegas_session_cancel from another thread stops a running CUDA generation;
// - a model too large for the device fails to load with OUT_OF_MEMORY and a
//   message, leaves no device memory behind, and the device still loads and
//   runs a model afterwards.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../unit/support/model_dir.h"
#include "vegas.h"

namespace {

// The device machine sets VEGAS_MODEL_DIR (tools/device-check.sh).
const std::string kModelDir = vegas::test::embedded_model_dir();

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

vegas_model *load_cuda_model() {
  vegas_model_options mo;
  vegas_model_options_init(&mo);
  mo.backend = VEGAS_BACKEND_CUDA;
  vegas_model *model = nullptr;
  EXPECT_EQ(vegas_model_load(kModelDir.c_str(), &mo, &model), VEGAS_OK) << vegas_last_error();
  return model;
}

std::vector<int32_t> prompt_of(int i) {
  std::vector<int32_t> p;
  for (int k = 0; k < 300 + 50 * i; ++k) p.push_back((k * 7919 + 13 * i) % 8000 + 1);
  return p;
}

std::vector<int32_t> generate(vegas_model *model, const std::vector<int32_t> &prompt,
                              int32_t max_tokens, int32_t mode) {
  vegas_session_options so;
  vegas_session_options_init(&so);
  so.kv_bytes = 64u << 20;
  so.mode = mode;
  vegas_session *s = nullptr;
  EXPECT_EQ(vegas_session_create(model, &so, &s), VEGAS_OK) << vegas_last_error();
  if (s == nullptr) return {};
  vegas_request req;
  vegas_request_init(&req);
  req.prompt = prompt.data();
  req.n_prompt = prompt.size();
  req.max_tokens = max_tokens;
  req.ignore_eos = 1;
  int32_t seq = -1;
  std::vector<int32_t> out(static_cast<size_t>(max_tokens));
  size_t n = 0;
  if (vegas_session_submit(s, &req, &seq) != VEGAS_OK || vegas_session_run(s) != VEGAS_OK ||
      vegas_sequence_tokens(s, seq, out.data(), out.size(), &n) != VEGAS_OK)
    n = 0;
  out.resize(n);
  vegas_session_free(s);
  return out;
}

// Four threads, each with its own session (vanilla or Vegas, alternating) on
// one CUDA model, generate at once; greedy is deterministic per request, so
// any interference between sessions (shared streams, scratch, graphs, cuBLASLt
// handles) would change tokens.
TEST(CudaAbiRobustness, OneModelManySessionsOnManyThreads) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  vegas_model *model = load_cuda_model();
  ASSERT_NE(model, nullptr);
  constexpr int kThreads = 4;
  constexpr int32_t kTokens = 24;
  auto mode_of = [](int i) { return i % 2 ? VEGAS_MODE_VEGAS : VEGAS_MODE_VANILLA; };
  std::vector<std::vector<int32_t>> alone(kThreads), together(kThreads);
  for (int i = 0; i < kThreads; ++i) alone[i] = generate(model, prompt_of(i), kTokens, mode_of(i));
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back(
          [&, i] { together[i] = generate(model, prompt_of(i), kTokens, mode_of(i)); });
    for (std::thread &t : threads) t.join();
    for (int i = 0; i < kThreads; ++i) {
      ASSERT_EQ(alone[i].size(), static_cast<size_t>(kTokens)) << "request " << i;
      EXPECT_EQ(together[i], alone[i]) << "request " << i << " round " << round;
    }
  }
  vegas_model_free(model);
}

int32_t count_tokens(int32_t, int32_t, const char *, size_t, void *user) {
  static_cast<std::atomic<int32_t> *>(user)->fetch_add(1);
  return 0;
}

// Cancel from another thread while a CUDA run is in progress: the run returns
// OK, the sequence is CANCELLED long before max_tokens and keeps its tokens.
TEST(CudaAbiRobustness, CancelFromAnotherThread) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  vegas_model *model = load_cuda_model();
  ASSERT_NE(model, nullptr);
  vegas_session_options so;
  vegas_session_options_init(&so);
  so.kv_bytes = 256u << 20;
  vegas_session *s = nullptr;
  ASSERT_EQ(vegas_session_create(model, &so, &s), VEGAS_OK) << vegas_last_error();
  const std::vector<int32_t> prompt = prompt_of(0);
  std::atomic<int32_t> tokens{0};
  vegas_request req;
  vegas_request_init(&req);
  req.prompt = prompt.data();
  req.n_prompt = prompt.size();
  req.max_tokens = 1 << 20;
  req.ignore_eos = 1;
  req.on_token = count_tokens;
  req.user_data = &tokens;
  int32_t seq = -1;
  ASSERT_EQ(vegas_session_submit(s, &req, &seq), VEGAS_OK) << vegas_last_error();
  std::thread canceller([&] {
    while (tokens.load() < 20) std::this_thread::yield();
    EXPECT_EQ(vegas_session_cancel(s, -1), VEGAS_OK);
  });
  EXPECT_EQ(vegas_session_run(s), VEGAS_OK) << vegas_last_error();
  canceller.join();
  vegas_sequence_info info;
  info.struct_size = sizeof(info);
  ASSERT_EQ(vegas_sequence_get_info(s, seq, &info), VEGAS_OK) << vegas_last_error();
  EXPECT_EQ(info.finish_reason, VEGAS_FINISH_CANCELLED);
  EXPECT_GE(info.n_generated, 20);
  EXPECT_LT(info.n_generated, 100000);
  EXPECT_EQ(info.n_generated, tokens.load());
  vegas_session_free(s);
  vegas_model_free(model);
}

// A config whose weights cannot fit: OUT_OF_MEMORY with a message, no device
// memory left behind (within 64 MiB of what was free before: the CUDA
// context's own allocations), and the device stays usable.
TEST(CudaAbiRobustness, OutOfDeviceMemoryAtLoadIsAnErrorAndLeaksNothing) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::string path = ::testing::TempDir() + "/huge_config.json";
  {
    std::ofstream f(path);
    f << R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128,
             "hidden_size": 8192, "intermediate_size": 65536, "num_attention_heads": 64,
             "num_hidden_layers": 200, "num_key_value_heads": 8, "rms_norm_eps": 1e-6,
             "rope_theta": 1000000, "vocab_size": 151936, "max_position_embeddings": 32768,
             "tie_word_embeddings": false})";
  }
  // Warm the CUDA context first so its own allocations are not counted.
  vegas_model *warm = load_cuda_model();
  ASSERT_NE(warm, nullptr);
  vegas_model_free(warm);
  size_t free_before = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  vegas_model_options mo;
  vegas_model_options_init(&mo);
  mo.backend = VEGAS_BACKEND_CUDA;
  vegas_model *huge = nullptr;
  EXPECT_EQ(vegas_model_load_synthetic(path.c_str(), 1, &mo, &huge), VEGAS_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(huge, nullptr);
  const std::string message = vegas_last_error();
  EXPECT_NE(message.find("memory"), std::string::npos) << message;
  std::printf("[cuda-oom] %s\n", message.c_str());
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_GE(free_after + (64u << 20), free_before)
      << "device memory lost by the failed load: " << (free_before - free_after) / (1 << 20)
      << " MiB";
  // Still usable.
  vegas_model *model = load_cuda_model();
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(generate(model, prompt_of(1), 8, VEGAS_MODE_VANILLA).size(), 8u);
  vegas_model_free(model);
}

}  // namespace
