// The speculative statistics through the public ABI (issue P0-4, "Must show" 4)
// on the embedded model and a public 2K prompt, greedy:
// - policy `full` drafts with full attention, so every draft is accepted: each
//   round commits gamma + 1 tokens except the last, which is cut to the tokens
//   left; rounds, drafted, accepted, tau and acceptance by position are exact;
// - policy `vegas` (sparse) gives counters that are mutually consistent
//   (acceptance by position is non-increasing, sums match, tau = committed/rounds);
// - both sessions, driven through vegas_session_*, generate the vanilla tokens;
// - VEGAS_MODE_AUTO mixes rounds and vanilla steps, losslessly, and runs no
//   round where its tuning profile says vanilla paid.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "safetensors_writer.h"
#include "session/mode_chooser.h"
#include "speculative_test_data.h"
#include "support/abi_model.h"
#include "tokenizer/tokenizer.h"
#include "vegas.h"

namespace vegas {
namespace {

constexpr int32_t kGamma = 6;
constexpr int32_t kMaxTokens = 60;  // 59 after the prefill token: the last round is partial

struct Generation {
  std::vector<int32_t> tokens;
  vegas_sequence_info info{};
  vegas_session_stats stats{};
};

void expect_ok(vegas_status status) {
  ASSERT_EQ(status, VEGAS_OK) << vegas_status_name(status) << ": " << vegas_last_error();
}

Generation generate(vegas_model *model, const std::vector<int32_t> &prompt, int32_t mode,
                    const char *policy, int32_t max_tokens = kMaxTokens,
                    const char *profile_path = nullptr) {
  Generation g;
  vegas_session_options so;
  vegas_session_options_init(&so);
  so.mode = mode;
  so.policy = policy;
  so.gamma = kGamma;
  so.profile_path = profile_path;
  vegas_session *session = nullptr;
  expect_ok(vegas_session_create(model, &so, &session));
  std::unique_ptr<vegas_session, void (*)(vegas_session *)> guard(session, vegas_session_free);
  vegas_request req;
  vegas_request_init(&req);
  req.prompt = prompt.data();
  req.n_prompt = prompt.size();
  req.max_tokens = max_tokens;
  req.ignore_eos = 1;
  int32_t id = -1;
  expect_ok(vegas_session_submit(session, &req, &id));
  expect_ok(vegas_session_run(session));
  g.tokens.resize(static_cast<size_t>(max_tokens));
  size_t n = 0;
  expect_ok(vegas_sequence_tokens(session, id, g.tokens.data(), g.tokens.size(), &n));
  g.tokens.resize(n);
  g.info.struct_size = sizeof(g.info);
  expect_ok(vegas_sequence_get_info(session, id, &g.info));
  g.stats.struct_size = sizeof(g.stats);
  expect_ok(vegas_session_get_stats(session, &g.stats));
  return g;
}

class SpeculativeStats : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_model_and_prompts()) GTEST_SKIP() << "embedded model or prompts absent";
    ASSERT_EQ(test::load_cpu_model(test::embedded_model_dir(), &model_), VEGAS_OK)
        << vegas_last_error();
    auto tokenizer = Tokenizer::load(test::embedded_model_dir() + "/tokenizer.json");
    prompt_ = test::load_public_prompts(*tokenizer, "-2k").at(0).ids;
  }
  void TearDown() override { vegas_model_free(model_); }

  vegas_model *model_ = nullptr;
  std::vector<int32_t> prompt_;
};

TEST_F(SpeculativeStats, FullPolicyAcceptsEveryDraftAndCountsExactly) {
  const Generation vanilla = generate(model_, prompt_, VEGAS_MODE_VANILLA, nullptr);
  const Generation full = generate(model_, prompt_, VEGAS_MODE_VEGAS, "full");
  ASSERT_EQ(vanilla.tokens.size(), static_cast<size_t>(kMaxTokens));
  EXPECT_EQ(full.tokens, vanilla.tokens);

  // What rounds must look like when every draft is accepted.
  int64_t rounds = 0, drafted = 0;
  std::vector<int64_t> drafted_at(kGamma, 0);
  for (int32_t left = kMaxTokens - 1; left > 0;) {
    const int32_t gamma = std::min(kGamma, left - 1);
    for (int32_t i = 0; i < gamma; ++i) drafted_at[static_cast<size_t>(i)] += 1;
    drafted += gamma;
    rounds += 1;
    left -= gamma + 1;
  }
  ASSERT_EQ(rounds, 9);  // 8 rounds of 7 tokens and one of 3
  const vegas_session_stats &s = full.stats;
  EXPECT_EQ(s.gamma, kGamma);
  EXPECT_EQ(s.rounds, rounds);
  EXPECT_EQ(s.drafted, drafted);
  EXPECT_EQ(s.accepted, drafted);
  EXPECT_EQ(s.committed, kMaxTokens - 1);
  EXPECT_DOUBLE_EQ(s.tokens_per_round, static_cast<double>(kMaxTokens - 1) / rounds);
  for (int32_t i = 0; i < VEGAS_MAX_GAMMA; ++i) {
    const int64_t expected = i < kGamma ? drafted_at[static_cast<size_t>(i)] : 0;
    EXPECT_EQ(s.drafted_at[i], expected) << "position " << i;
    EXPECT_EQ(s.accepted_at[i], expected) << "position " << i;
  }
  EXPECT_GT(s.draft_seconds, 0.0);
  EXPECT_GT(s.verify_seconds, 0.0);
  EXPECT_GT(s.select_seconds, 0.0);
  // The per-sequence view of the only sequence agrees.
  EXPECT_EQ(full.info.rounds, s.rounds);
  EXPECT_EQ(full.info.drafted, s.drafted);
  EXPECT_EQ(full.info.accepted, s.accepted);
  EXPECT_DOUBLE_EQ(full.info.tokens_per_round, s.tokens_per_round);
  EXPECT_EQ(full.info.n_generated, kMaxTokens);
  // Vanilla sessions report no speculative work.
  EXPECT_EQ(vanilla.stats.rounds, 0);
  EXPECT_EQ(vanilla.info.rounds, 0);
}

TEST_F(SpeculativeStats, SparsePolicyCountersAreConsistent) {
  const Generation vanilla = generate(model_, prompt_, VEGAS_MODE_VANILLA, nullptr);
  const Generation sparse = generate(model_, prompt_, VEGAS_MODE_VEGAS, "vegas");
  EXPECT_EQ(sparse.tokens, vanilla.tokens);
  const vegas_session_stats &s = sparse.stats;
  EXPECT_GT(s.rounds, 0);
  EXPECT_LT(s.accepted, s.drafted) << "a 2K prompt at min_tokens 256 drafts sparsely";
  EXPECT_EQ(s.committed, s.accepted + s.rounds);
  EXPECT_EQ(s.committed, kMaxTokens - 1);
  EXPECT_DOUBLE_EQ(s.tokens_per_round, static_cast<double>(s.committed) / s.rounds);
  int64_t sum_drafted = 0, sum_accepted = 0;
  for (int32_t i = 0; i < kGamma; ++i) {
    sum_drafted += s.drafted_at[i];
    sum_accepted += s.accepted_at[i];
    EXPECT_LE(s.accepted_at[i], s.drafted_at[i]);
    // Draft i+1 is only accepted after draft i was.
    if (i + 1 < kGamma) {
      EXPECT_GE(s.accepted_at[i], s.accepted_at[i + 1]) << "position " << i;
    }
  }
  EXPECT_EQ(sum_drafted, s.drafted);
  EXPECT_EQ(sum_accepted, s.accepted);
  EXPECT_EQ(sparse.info.accepted, s.accepted);
  EXPECT_DOUBLE_EQ(sparse.info.tokens_per_round, s.tokens_per_round);
}

// VEGAS_MODE_AUTO explores both kinds of decode step before choosing (three
// rounds, then three vanilla steps, the first of each uncounted: ModeChooser),
// so a 60-token generation
// has tokens from rounds and from vanilla steps, and still the vanilla tokens;
// the round counters stay consistent, counting only the rounds' tokens.
TEST_F(SpeculativeStats, AutoModeMixesRoundsAndVanillaStepsLosslessly) {
  const Generation vanilla = generate(model_, prompt_, VEGAS_MODE_VANILLA, nullptr);
  const Generation mixed = generate(model_, prompt_, VEGAS_MODE_AUTO, "vegas");
  EXPECT_EQ(mixed.tokens, vanilla.tokens);
  const vegas_session_stats &s = mixed.stats;
  EXPECT_GE(s.rounds, ModeChooser::kMinSamples + 1);
  EXPECT_EQ(s.committed, s.accepted + s.rounds);
  EXPECT_LE(s.committed, kMaxTokens - 1 - (ModeChooser::kMinSamples + 1))
      << "the vanilla steps committed a token each";
  EXPECT_EQ(mixed.info.rounds, s.rounds);
  EXPECT_EQ(mixed.info.n_generated, kMaxTokens);
}

// The same on a 300-token prefix of the prompt and 24 tokens (what the
// sanitizer run keeps: tools/sanitize.sh leaves the 2K runs out).
TEST_F(SpeculativeStats, AutoModeOnAShortPrompt) {
  const std::vector<int32_t> prefix(prompt_.begin(), prompt_.begin() + 300);
  constexpr int32_t kTokens = 24;
  const Generation vanilla = generate(model_, prefix, VEGAS_MODE_VANILLA, nullptr, kTokens);
  const Generation mixed = generate(model_, prefix, VEGAS_MODE_AUTO, "vegas", kTokens);
  ASSERT_EQ(vanilla.tokens.size(), static_cast<size_t>(kTokens));
  EXPECT_EQ(mixed.tokens, vanilla.tokens);
  EXPECT_GE(mixed.stats.rounds, ModeChooser::kMinSamples + 1);
  EXPECT_LE(mixed.stats.committed, kTokens - 1 - (ModeChooser::kMinSamples + 1))
      << "the vanilla steps committed a token each";
}

// A profile made on this backend whose bucket holding the shape says
// "mode": "vanilla" (vegas tune found that Vegas did not pay there): auto mode
// runs vanilla steps only (a round would come after ModeChooser::
// kPriorProbeSteps steps), where without it it explores rounds first (above).
// A bucket of other shapes with the same mark changes nothing.
TEST_F(SpeculativeStats, AutoModeFollowsAVanillaProfile) {
  auto profile = [](int64_t context_min, const char *mode) {
    return R"({"format":"vegas-profile/1","backend":"cpu","buckets":[{"context_min":)" +
           std::to_string(context_min) +
           R"(,"context_max":-1,"batch_min":1,"batch_max":-1,"policy":"vegas","gamma":6,)"
           R"("ratio":0.07,"speedup":0.6,"mode":")" +
           mode + R"("}]})";
  };
  const std::vector<int32_t> prefix(prompt_.begin(), prompt_.begin() + 300);
  constexpr int32_t kTokens = 24;
  test::TempDir dir;
  const std::string here = dir.write("here.json", profile(0, "vanilla"));
  const Generation vanilla = generate(model_, prefix, VEGAS_MODE_VANILLA, nullptr, kTokens);
  const Generation guided =
      generate(model_, prefix, VEGAS_MODE_AUTO, "vegas", kTokens, here.c_str());
  EXPECT_EQ(guided.tokens, vanilla.tokens);
  EXPECT_EQ(guided.stats.rounds, 0);
  EXPECT_EQ(guided.info.n_generated, kTokens);
  const std::string elsewhere = dir.write("elsewhere.json", profile(1 << 20, "vanilla"));
  const Generation exploring =
      generate(model_, prefix, VEGAS_MODE_AUTO, "vegas", kTokens, elsewhere.c_str());
  EXPECT_EQ(exploring.tokens, vanilla.tokens);
  EXPECT_GE(exploring.stats.rounds, ModeChooser::kMinSamples + 1);
}

TEST_F(SpeculativeStats, UnknownModeIsRefused) {
  vegas_session_options so;
  vegas_session_options_init(&so);
  so.mode = VEGAS_MODE_AUTO + 1;
  vegas_session *session = nullptr;
  EXPECT_EQ(vegas_session_create(model_, &so, &session), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(session, nullptr);
  EXPECT_NE(std::string(vegas_last_error()).find("unknown mode"), std::string::npos)
      << vegas_last_error();
}

}  // namespace
}  // namespace vegas
