// A backend that fails in the middle of decoding (a device fault, say) must
// leave the session usable: Session::step throws BACKEND, no committed token
// is lost or repeated, and once the backend works again every sequence goes on
// exactly as in a run without the fault (greedy). Checked in vanilla mode
// (fault in the prefill, in a decode step) and in Vegas mode (in a draft pass
// and in a verification pass), on the embedded model through a wrapper of the
// CPU backend (ModelLoadOptions::make_backend) that throws at a chosen call.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "common/error.h"
#include "model/model.h"
#include "session/session.h"
#include "support/model_dir.h"

namespace vegas {
namespace {

int g_calls = 0;    // forward passes since the session was made
int g_fail_at = 0;  // the pass that throws; 0 = none

class FaultyContext final : public BackendContext {
 public:
  explicit FaultyContext(std::unique_ptr<BackendContext> inner) : inner_(std::move(inner)) {}
  const float *forward(const ForwardBatch &batch) override {
    if (++g_calls == g_fail_at) fail(VEGAS_ERR_BACKEND, "injected device fault");
    return inner_->forward(batch);
  }
  bool device_selection() const override { return inner_->device_selection(); }
  void select_deferred(const std::vector<DeferredSelect> &items) override {
    inner_->select_deferred(items);
  }
  void forget_selection(int32_t key) override { inner_->forget_selection(key); }
  double take_select_seconds() override { return inner_->take_select_seconds(); }

 private:
  std::unique_ptr<BackendContext> inner_;
};

class FaultyBackend final : public BackendModel {
 public:
  explicit FaultyBackend(std::unique_ptr<BackendModel> inner) : inner_(std::move(inner)) {}
  BackendKind kind() const override { return inner_->kind(); }
  const ModelConfig &config() const override { return inner_->config(); }
  uint64_t weight_bytes() const override { return inner_->weight_bytes(); }
  uint64_t kv_bytes_per_token(bool fp8) const override { return inner_->kv_bytes_per_token(fp8); }
  std::unique_ptr<BackendContext> create_context(const ContextParams &params) override {
    return std::make_unique<FaultyContext>(inner_->create_context(params));
  }
  double measure_copy_bandwidth() const override { return inner_->measure_copy_bandwidth(); }

 private:
  std::unique_ptr<BackendModel> inner_;
};

std::shared_ptr<Model> faulty_model() {
  static std::shared_ptr<Model> model = [] {
    ModelLoadOptions o;
    o.make_backend = [](const ModelConfig &c, const ModelWeights &w) {
      return std::unique_ptr<BackendModel>(
          new FaultyBackend(create_cpu_backend(c, w, CpuBackendOptions{})));
    };
    return Model::load(test::embedded_model_dir(), o);
  }();
  return model;
}

constexpr int32_t kNew = 20;

// Two sequences decoded together (greedy) until both end, with the backend
// failing at pass `fail_at` (0 = never); the generated tokens of each, and
// how many steps threw.
std::vector<std::vector<int32_t>> decode(bool vegas, int fail_at, int *faults) {
  SessionParams params;
  params.speculative = vegas;
  params.spec.policy = "vegas";
  params.spec.gamma = 4;
  Session session(faulty_model(), params);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> tok(100, faulty_model()->config().vocab_size - 1);
  std::vector<int32_t> ids;
  for (int s = 0; s < 2; ++s) {
    SequenceRequest req;
    for (int t = 0; t < 48 + 16 * s; ++t) req.prompt.push_back(tok(rng));
    req.max_tokens = kNew;
    req.ignore_eos = true;
    ids.push_back(session.submit(std::move(req)));
  }
  g_calls = 0;
  g_fail_at = fail_at;
  *faults = 0;
  for (int guard = 0; guard < 200; ++guard) {
    try {
      if (session.step() == 0) break;
    } catch (const Error &e) {
      EXPECT_EQ(e.status(), VEGAS_ERR_BACKEND) << e.what();
      ++*faults;
    }
  }
  g_fail_at = 0;
  std::vector<std::vector<int32_t>> out;
  for (int32_t id : ids) {
    const Sequence &seq = session.sequence(id);
    EXPECT_EQ(seq.status, VEGAS_OK);
    out.emplace_back(seq.tokens.begin() + seq.n_prompt(), seq.tokens.end());
  }
  return out;
}

// Proves: vanilla decoding survives a fault in the prefill pass (1) and in a
// decode pass (5) with exactly the tokens of a run without faults.
TEST(SessionBackendFaults, VanillaGoesOnAfterAFault) {
  int faults = 0;
  const auto want = decode(false, 0, &faults);
  ASSERT_EQ(faults, 0);
  ASSERT_EQ(want[0].size(), static_cast<size_t>(kNew));
  for (int fail_at : {1, 5}) {
    const auto got = decode(false, fail_at, &faults);
    EXPECT_EQ(faults, 1) << "fault at pass " << fail_at;
    EXPECT_EQ(got, want) << "fault at pass " << fail_at;
  }
}

// Proves the same in Vegas mode (gamma 4: after the prefill pass, four draft
// passes then one verification pass a round): faults in a draft pass (3, 8)
// and in verification passes (6, 11) lose no committed token and change none.
TEST(SessionBackendFaults, VegasGoesOnAfterAFault) {
  int faults = 0;
  const auto want = decode(true, 0, &faults);
  ASSERT_EQ(faults, 0);
  ASSERT_EQ(want[0].size(), static_cast<size_t>(kNew));
  EXPECT_EQ(want, decode(false, 0, &faults));  // lossless, as a sanity check of the harness
  for (int fail_at : {3, 6, 8, 11}) {
    const auto got = decode(true, fail_at, &faults);
    EXPECT_EQ(faults, 1) << "fault at pass " << fail_at;
    EXPECT_EQ(got, want) << "fault at pass " << fail_at;
  }
}

}  // namespace
}  // namespace vegas
