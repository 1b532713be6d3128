// Automatic γ at run time on the embedded model, CPU backend (issue P1-9,
// "Must show"): a tuning profile that is deliberately wrong (γ 1) is corrected
// at run time. On the public prompt xml-2k, greedy, the test
//  1. sweeps fixed γ (1..16) from one shared prefill and measures τ(γ) and
//     the per-step costs: the draft step and the verify pass as a line in its
//     rows, pooled over the sweep;
//  2. runs the same generation with γ auto, starting from a profile that
//     says γ 16 for a prompt (xml-2k) whose acceptance falls off with depth;
//  3. asserts that it switched within warm-up + window rounds, that the γ it
//     ends with gives tokens/s within 10% of the best fixed γ, and that its
//     tokens equal plain (vanilla) decoding.
// Tokens/s are compared as the model predicts them from the measured costs,
// rate(γ) = τ(γ) / (γ·t_draft + t_verify(γ + 1)), not as wall-clock rates of
// separate runs: on the shared 2-core CI machine the step costs moved by 3x
// between two runs of this test (verify 1.35 vs 4.8 ms per row), so a
// wall-clock comparison, and a controller fed by the live clock, would test
// the machine's load. The asserted auto run therefore gets the sweep's cost
// model through SpeculativeParams::debug_round_costs; a second run on the
// live clock is printed ([auto] lines) with the measured rates.
//
// The second half checks the C ABI of the feature: profile errors at session
// create, the model directory's vegas-profile.json, the statistics and the
// switch log, and greedy losslessness with every knob auto.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "safetensors_writer.h"
#include "session/session.h"
#include "speculative_harness.h"
#include "speculative_test_data.h"
#include "support/abi_model.h"
#include "support/session_run.h"
#include "vegas.h"

namespace vegas {
namespace {

constexpr int32_t kNewTokens = 160;
const int32_t kSweep[] = {1, 2, 3, 4, 6, 8, 10, 12, 16};

std::shared_ptr<Model> &shared_model() {
  return test::shared_cpu_model(test::embedded_model_dir());
}

std::vector<int32_t> vanilla_tokens(const std::vector<int32_t> &prompt, int32_t max_tokens) {
  return test::session_tokens(shared_model(), SessionParams{}, prompt, max_tokens);
}

std::string profile_json(const std::string &backend, const std::string &policy, int32_t gamma,
                         double ratio) {
  return R"({"format":"vegas-profile/1","model":"vegas-code-22m","backend":")" + backend +
         R"(","created_by":"test_auto_tuning","buckets":[{"context_min":0,"context_max":-1,)"
         R"("batch_min":1,"batch_max":-1,"policy":")" +
         policy + R"(","window_share":0.5,"gamma":)" + std::to_string(gamma) + R"(,"ratio":)" +
         std::to_string(ratio) + "}]}";
}

struct Measured {
  double tau = 0.0;
  double wall_rate = 0.0;  // committed / (draft + verify + select seconds) of that run
};

// Least-squares line through (rows, seconds).
struct Line {
  double fixed = 0.0, per_row = 0.0;
  double at(double rows) const { return fixed + per_row * rows; }
};

Line fit(const std::vector<std::pair<double, double>> &points) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto &p : points) {
    n += 1;
    sx += p.first;
    sy += p.second;
    sxx += p.first * p.first;
    sxy += p.first * p.second;
  }
  Line l;
  l.per_row = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  l.fixed = (sy - l.per_row * sx) / n;
  return l;
}

TEST(AutoTuning, WrongProfileIsCorrectedAtRunTime) {
  if (!test::have_model_and_prompts()) GTEST_SKIP() << "embedded model or public prompts absent";
  test::TokenizedPrompt prompt;
  for (auto &p : test::load_public_prompts(shared_model()->tokenizer(), "-2k"))
    if (p.id == "xml-2k") prompt = p;
  ASSERT_FALSE(prompt.ids.empty()) << "public prompt xml-2k absent";
  test::SharedPrefixRunner runner(*shared_model(), prompt.ids, kNewTokens, kAutoGammaCeiling);

  // 1. The fixed-γ sweep: τ per γ, and the costs pooled over every run.
  std::map<int32_t, Measured> by_gamma;
  double draft_seconds = 0.0;
  int64_t drafted = 0;
  std::vector<std::pair<double, double>> verify_points;
  std::vector<int32_t> reference;
  auto measure = [&](int32_t gamma) {
    SpeculativeParams params;
    params.gamma = gamma;
    const test::SpeculativeRun run = runner.run(params, SamplingParams{}, kNewTokens);
    const SpeculativeTotals &t = run.totals;
    if (reference.empty()) reference = run.generated;
    EXPECT_EQ(run.generated, reference) << "gamma " << gamma;
    Measured m;
    m.tau = static_cast<double>(t.committed) / t.rounds;
    m.wall_rate = t.committed / (t.draft_seconds + t.verify_seconds + t.select_seconds);
    by_gamma[gamma] = m;
    draft_seconds += t.draft_seconds;
    drafted += t.drafted;
    verify_points.push_back({gamma + 1.0, t.verify_seconds / t.rounds});
  };
  for (int32_t gamma : kSweep) measure(gamma);
  const double t_draft = draft_seconds / static_cast<double>(drafted);
  const Line verify = fit(verify_points);
  auto rate = [&](int32_t gamma) {
    return by_gamma.at(gamma).tau / (gamma * t_draft + verify.at(gamma + 1.0));
  };
  int32_t best = kSweep[0];
  for (int32_t gamma : kSweep)
    if (rate(gamma) > rate(best)) best = gamma;
  // Deliberately wrong: γ 16, where this prompt's acceptance falls off (τ
  // 1.9 / 4.0 / 6.1 at γ 1 / 4 / 16 greedy), so 16 drafts cost far more than
  // the tokens they give on any machine; the best is a short γ.
  constexpr int32_t wrong = 16;

  // 2. γ auto from a profile that says `wrong`. The controller gets the
  // sweep's cost model instead of its own clock (debug_round_costs), so the
  // load of the machine during this run cannot change its decisions; the
  // acceptance it sees is the model's own. A second run on the live clock is
  // reported (and must be lossless) but its γ is not asserted.
  auto auto_run = [&](bool fixed_costs) {
    SpeculativeParams params;
    params.autos.gamma = true;
    params.profile = TuningProfile::parse(profile_json("cpu", "vegas", wrong, 0.07), "wrong.json");
    if (fixed_costs)
      params.debug_round_costs = [&](RoundObservation &o) {
        o.draft_step_seconds = t_draft;
        o.verify_seconds = verify.at(o.verify_rows);
      };
    return runner.run(params, SamplingParams{}, kNewTokens);
  };
  const test::SpeculativeRun run = auto_run(true);
  const test::SpeculativeRun live = auto_run(false);
  const int32_t final_gamma = run.stats.gamma;
  if (by_gamma.count(final_gamma) == 0) measure(final_gamma);  // its τ; the costs stay pooled

  for (const auto &entry : by_gamma)
    std::printf("[auto] gamma %2d: tau %5.2f, predicted %6.1f tok/s, measured %6.1f tok/s\n",
                entry.first, entry.second.tau, rate(entry.first), entry.second.wall_rate);
  std::printf("[auto] costs: draft step %.2f ms, verify %.2f ms + %.2f ms/row\n", 1e3 * t_draft,
              1e3 * verify.fixed, 1e3 * verify.per_row);
  for (const SwitchRecord &s : run.switches)
    std::printf("[auto] switch after round %lld: gamma %d -> %d (tau EMA %.2f)\n",
                static_cast<long long>(s.event.round), s.event.from.gamma, s.event.to.gamma,
                s.event.tau_ema);
  std::printf(
      "[auto] profile gamma %d -> final gamma %d: %.1f tok/s predicted; best fixed gamma "
      "%d: %.1f tok/s (final at %.0f%% of best, profile's at %.0f%%)\n",
      wrong, final_gamma, rate(final_gamma), best, rate(best),
      100.0 * rate(final_gamma) / rate(best), 100.0 * rate(wrong) / rate(best));
  std::printf("[auto] live clock: %zu switches, final gamma %d, %.1f tok/s measured\n",
              live.switches.size(), live.stats.gamma,
              live.totals.committed / (live.totals.draft_seconds + live.totals.verify_seconds +
                                       live.totals.select_seconds));

  // 3. The claims.
  ASSERT_GT(rate(best), 1.1 * rate(wrong)) << "the profile's gamma must be clearly wrong here";
  ASSERT_FALSE(run.switches.empty()) << "no switch away from the wrong gamma " << wrong;
  EXPECT_LE(run.switches[0].event.round, kWarmupRounds + kWindowRounds);
  EXPECT_EQ(run.switches[0].event.from.gamma, wrong);
  EXPECT_NE(run.switches[0].event.to.gamma, wrong);
  EXPECT_LE(static_cast<int32_t>(run.switches.size()), kMaxSwitches);
  EXPECT_EQ(run.stats.switches, static_cast<int64_t>(run.switches.size()));
  EXPECT_EQ(run.switches.back().event.to.gamma, final_gamma);
  EXPECT_GE(rate(final_gamma), 0.9 * rate(best));
  // Lossless: every fixed γ and both auto runs give vanilla's tokens.
  EXPECT_EQ(run.generated, reference);
  EXPECT_EQ(live.generated, reference);
  EXPECT_EQ(vanilla_tokens(prompt.ids, kNewTokens), reference);
}

// ----------------------------------------------------------------- C ABI

void expect_ok(vegas_status status) {
  ASSERT_EQ(status, VEGAS_OK) << vegas_status_name(status) << ": " << vegas_last_error();
}

class AutoTuningAbi : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_model_and_prompts()) GTEST_SKIP() << "embedded model or prompts absent";
    expect_ok(test::load_cpu_model(test::embedded_model_dir(), &model_));
  }
  void TearDown() override { vegas_model_free(model_); }

  vegas_status create(const vegas_session_options &so, vegas_session **out) {
    return vegas_session_create(model_, &so, out);
  }

  vegas_model *model_ = nullptr;
};

vegas_session_options auto_options(const char *profile_path) {
  vegas_session_options so;
  vegas_session_options_init(&so);
  so.mode = VEGAS_MODE_VEGAS;
  so.gamma = 0;
  so.ratio = 0.0f;
  so.policy = "auto";
  so.profile_path = profile_path;
  so.kv_bytes = 64u << 20;
  return so;
}

TEST_F(AutoTuningAbi, ProfileErrorsFailSessionCreate) {
  test::TempDir dir;
  vegas_session *s = nullptr;
  vegas_session_options so = auto_options(nullptr);
  EXPECT_EQ(so.profile_path, nullptr);  // the default of init

  const std::string missing = dir.path() + "/missing.json";
  so.profile_path = missing.c_str();
  EXPECT_EQ(create(so, &s), VEGAS_ERR_IO);
  EXPECT_NE(std::string(vegas_last_error()).find("missing.json"), std::string::npos);

  const std::string bad = dir.write("bad.json", profile_json("cpu", "vegas", 0, 0.07));
  so.profile_path = bad.c_str();
  EXPECT_EQ(create(so, &s), VEGAS_ERR_FORMAT);
  EXPECT_NE(std::string(vegas_last_error()).find("buckets[0].gamma"), std::string::npos)
      << vegas_last_error();

  const std::string cuda = dir.write("cuda.json", profile_json("cuda", "vegas", 6, 0.07));
  so.profile_path = cuda.c_str();
  EXPECT_EQ(create(so, &s), VEGAS_ERR_INVALID_ARGUMENT);
  so.profile_path = "";
  EXPECT_EQ(create(so, &s), VEGAS_ERR_INVALID_ARGUMENT);
  // A named bad file fails even when every knob is explicit (and in vanilla mode).
  vegas_session_options fixed;
  vegas_session_options_init(&fixed);
  fixed.profile_path = bad.c_str();
  EXPECT_EQ(create(fixed, &s), VEGAS_ERR_FORMAT);
  EXPECT_EQ(s, nullptr);

  const std::string good = dir.write("good.json", profile_json("cpu", "streaming", 3, 0.1));
  so.profile_path = good.c_str();
  expect_ok(create(so, &s));
  vegas_session_free(s);
}

// Short generations (8 tokens: fewer rounds than the warm-up) show the
// starting point each profile gives.
vegas_sequence_info short_run(vegas_model *model, const vegas_session_options &so) {
  vegas_session *s = nullptr;
  vegas_sequence_info info{};
  EXPECT_EQ(vegas_session_create(model, &so, &s), VEGAS_OK) << vegas_last_error();
  if (s == nullptr) return info;
  const int32_t prompt[] = {755, 282, 2053, 25, 198, 262};
  vegas_request req;
  vegas_request_init(&req);
  req.prompt = prompt;
  req.n_prompt = sizeof prompt / sizeof prompt[0];
  req.max_tokens = 8;
  req.ignore_eos = 1;
  int32_t id = -1;
  EXPECT_EQ(vegas_session_submit(s, &req, &id), VEGAS_OK);
  EXPECT_EQ(vegas_session_run(s), VEGAS_OK);
  info.struct_size = sizeof info;
  EXPECT_EQ(vegas_sequence_get_info(s, id, &info), VEGAS_OK);
  vegas_session_free(s);
  return info;
}

TEST_F(AutoTuningAbi, StartsFromTheNamedTheModelDirectorysOrTheBuiltInProfile) {
  test::TempDir dir;
  vegas_session_options so = auto_options(nullptr);
  vegas_sequence_info info = short_run(model_, so);  // the embedded model dir has no profile
  EXPECT_EQ(info.gamma, 6);
  EXPECT_FLOAT_EQ(info.ratio, 0.07f);
  EXPECT_EQ(info.switches, 0);

  const std::string named = dir.write("named.json", profile_json("cpu", "vegas", 3, 0.125));
  so.profile_path = named.c_str();
  info = short_run(model_, so);
  EXPECT_EQ(info.gamma, 3);
  EXPECT_FLOAT_EQ(info.ratio, 0.125f);

  // Explicit knobs stay as given; only the auto ones come from the profile.
  so.gamma = 2;
  info = short_run(model_, so);
  EXPECT_EQ(info.gamma, 2);
  EXPECT_FLOAT_EQ(info.ratio, 0.125f);
  so.gamma = 0;
  so.ratio = 0.2f;
  info = short_run(model_, so);
  EXPECT_EQ(info.gamma, 3);
  EXPECT_FLOAT_EQ(info.ratio, 0.2f);

  // A model directory with its own vegas-profile.json: a copy of the embedded
  // model's files (links) next to a profile. The embedded model's own profile
  // is not linked: writing the test's profile would go through the link into
  // the repository's file.
  for (const auto &entry : std::filesystem::directory_iterator(test::embedded_model_dir()))
    if (entry.path().filename() != "vegas-profile.json")
      std::filesystem::create_symlink(entry.path(),
                                      dir.path() + "/" + entry.path().filename().string());
  vegas_model *linked = nullptr;
  dir.write("vegas-profile.json", profile_json("cpu", "vegas", 4, 0.05));
  expect_ok(test::load_cpu_model(dir.path(), &linked));
  so = auto_options(nullptr);
  info = short_run(linked, so);
  EXPECT_EQ(info.gamma, 4);
  EXPECT_FLOAT_EQ(info.ratio, 0.05f);
  // A profile of another backend there is skipped: the built-in table.
  dir.write("vegas-profile.json", profile_json("cuda", "vegas", 4, 0.05));
  info = short_run(linked, so);
  EXPECT_EQ(info.gamma, 6);
  vegas_model_free(linked);
}

// Two sequences decoded together with every knob auto, from a profile whose
// context buckets give them different starting γ (2 for a 300-token prompt,
// 16 for xml-2k): per-sequence γ in one lockstep draft loop, switches logged
// per sequence, and both sequences' tokens equal vanilla's.
TEST_F(AutoTuningAbi, GreedyLosslessWithEveryKnobAutoAndTheSwitchLog) {
  auto tokenizer = Tokenizer::load(test::embedded_model_dir() + "/tokenizer.json");
  std::vector<int32_t> prompts[2];
  for (const auto &p : test::load_public_prompts(*tokenizer, "-2k")) {
    if (p.id == "xml-2k") prompts[0] = p.ids;
    if (p.id == "json-2k") prompts[1].assign(p.ids.begin(), p.ids.begin() + 300);
  }
  ASSERT_FALSE(prompts[0].empty());
  ASSERT_EQ(prompts[1].size(), 300u);
  const int32_t start_gamma[2] = {16, 2};
  test::TempDir dir;
  const std::string path = dir.write("p.json", R"({"format":"vegas-profile/1","backend":"cpu",
    "buckets":[{"context_min":0,"context_max":1024,"batch_min":1,"batch_max":-1,
                "policy":"vegas","window_share":0.5,"gamma":2,"ratio":0.07},
               {"context_min":1024,"context_max":-1,"batch_min":1,"batch_max":-1,
                "policy":"vegas","window_share":0.5,"gamma":16,"ratio":0.07}]})");
  constexpr int32_t kTokens = 128;
  std::vector<int32_t> tokens[2][2];  // [mode][sequence]
  vegas_session_stats stats{};
  vegas_sequence_info info[2]{};
  int32_t ids[2] = {-1, -1};
  std::vector<vegas_switch_info> log;
  for (int mode = 0; mode < 2; ++mode) {
    vegas_session_options so = auto_options(path.c_str());
    if (mode == 0) so.mode = VEGAS_MODE_VANILLA;
    vegas_session *s = nullptr;
    expect_ok(vegas_session_create(model_, &so, &s));
    for (int q = 0; q < 2; ++q) {
      vegas_request req;
      vegas_request_init(&req);
      req.prompt = prompts[q].data();
      req.n_prompt = prompts[q].size();
      req.max_tokens = kTokens;
      req.ignore_eos = 1;
      expect_ok(vegas_session_submit(s, &req, &ids[q]));
    }
    expect_ok(vegas_session_run(s));
    for (int q = 0; q < 2; ++q) {
      tokens[mode][q].resize(kTokens);
      size_t n = 0;
      expect_ok(vegas_sequence_tokens(s, ids[q], tokens[mode][q].data(), kTokens, &n));
      tokens[mode][q].resize(n);
      info[q].struct_size = sizeof info[q];
      expect_ok(vegas_sequence_get_info(s, ids[q], &info[q]));
    }
    stats.struct_size = sizeof stats;
    expect_ok(vegas_session_get_stats(s, &stats));
    for (int64_t i = 0; i < stats.switches; ++i) {
      vegas_switch_info sw{};
      sw.struct_size = sizeof sw;
      expect_ok(vegas_session_get_switch(s, i, &sw));
      log.push_back(sw);
    }
    vegas_switch_info past{};
    past.struct_size = sizeof past;
    EXPECT_EQ(vegas_session_get_switch(s, stats.switches, &past), VEGAS_ERR_NOT_FOUND);
    EXPECT_EQ(vegas_session_get_switch(s, -1, &past), VEGAS_ERR_NOT_FOUND);
    EXPECT_EQ(vegas_session_get_switch(s, 0, nullptr), VEGAS_ERR_INVALID_ARGUMENT);
    if (stats.switches > 0) {  // an older, shorter struct gets only its fields
      unsigned char small[sizeof(vegas_switch_info)];
      std::fill(std::begin(small), std::end(small), 0xAB);
      reinterpret_cast<vegas_switch_info *>(small)->struct_size = 16;
      expect_ok(vegas_session_get_switch(s, 0, reinterpret_cast<vegas_switch_info *>(small)));
      EXPECT_EQ(small[16], 0xAB);
    }
    if (mode == 0) {
      EXPECT_EQ(stats.switches, 0);
      EXPECT_EQ(info[0].gamma, 0);
    }
    vegas_session_free(s);
  }
  int64_t per_sequence = 0;
  for (int q = 0; q < 2; ++q) {
    ASSERT_EQ(tokens[0][q].size(), static_cast<size_t>(kTokens));
    EXPECT_EQ(tokens[1][q], tokens[0][q]) << "sequence " << q << ": auto must stay lossless";
    std::printf(
        "[auto-abi] sequence %d: start gamma %d, %lld switches, final gamma %d ratio "
        "%.3f, tau %.2f\n",
        q, start_gamma[q], static_cast<long long>(info[q].switches), info[q].gamma, info[q].ratio,
        info[q].tokens_per_round);
    EXPECT_LE(info[q].switches, kMaxSwitches);
    per_sequence += info[q].switches;
    // The sequence's switches, in order, chain from its starting γ to its final one.
    int32_t gamma = start_gamma[q];
    for (const vegas_switch_info &sw : log) {
      if (sw.seq_id != ids[q]) continue;
      EXPECT_EQ(sw.from_gamma, gamma);
      gamma = sw.to_gamma;
    }
    EXPECT_EQ(info[q].gamma, gamma);
  }
  EXPECT_EQ(per_sequence, stats.switches);
  EXPECT_EQ(static_cast<int64_t>(log.size()), stats.switches);
  EXPECT_GE(stats.gamma, std::max(info[0].gamma, info[1].gamma));
  for (size_t i = 0; i < log.size(); ++i) {
    const vegas_switch_info &sw = log[i];
    std::printf(
        "[auto-abi] switch %zu: sequence %d after round %lld: gamma %d -> %d, ratio "
        "%.4f -> %.4f, tau EMA %.2f\n",
        i, sw.seq_id, static_cast<long long>(sw.round), sw.from_gamma, sw.to_gamma, sw.from_ratio,
        sw.to_ratio, sw.tau_ema);
    EXPECT_EQ(sw.struct_size, sizeof sw);
    EXPECT_TRUE(sw.from_gamma != sw.to_gamma || sw.from_ratio != sw.to_ratio);
    EXPECT_GE(sw.round, kWarmupRounds + kWindowRounds);
    EXPECT_GT(sw.tau_ema, 0.0);
  }
}

}  // namespace
}  // namespace vegas
