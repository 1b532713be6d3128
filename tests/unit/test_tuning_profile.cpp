// The tuning profile reader (runtime/speculative/tuning_profile.h, format
// vegas-profile/1): lookup by (context, batch) with the nearest-bucket rule,
// every missing or out-of-range field a FORMAT error naming the file and the
// field, IO for a missing file, and which profile a session resolves to.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "common/error.h"
#include "safetensors_writer.h"
#include "speculative/auto_tuning.h"
#include "speculative/tuning_profile.h"

namespace vegas {
namespace {

// gamma of the standard bucket (context index c, batch index b): 1..12, all different.
int32_t gamma_of(int c, int b) {
  return 3 * c + b + 1;
}

// The standard grid of `vegas tune`: context [0,4K) [4K,8K) [8K,16K) [16K,-1),
// batch [1,4] [5,16] [17,-1]; gamma encodes the bucket (gamma_of above).
std::string standard_profile(const std::string &backend = "cuda") {
  const int64_t context[][2] = {{0, 4096}, {4096, 8192}, {8192, 16384}, {16384, -1}};
  const int64_t batch[][2] = {{1, 4}, {5, 16}, {17, -1}};
  std::string buckets;
  for (int c = 0; c < 4; ++c)
    for (int b = 0; b < 3; ++b) {
      if (!buckets.empty()) buckets += ",";
      buckets +=
          "{\"context_min\":" + std::to_string(context[c][0]) +
          ",\"context_max\":" + std::to_string(context[c][1]) +
          ",\"batch_min\":" + std::to_string(batch[b][0]) +
          ",\"batch_max\":" + std::to_string(batch[b][1]) +
          ",\"policy\":\"vegas\",\"window_share\":0.5,\"gamma\":" + std::to_string(gamma_of(c, b)) +
          ",\"ratio\":0.07,\"tau\":5.4,\"tokens_per_s\":12000.0,\"speedup\":1.1}";
    }
  return "{\"format\":\"vegas-profile/1\",\"model\":\"vegas-code-22m\",\"backend\":\"" + backend +
         "\",\"device\":\"NVIDIA H100 80GB HBM3\",\"created_by\":\"vegas tune\",\"buckets\":[" +
         buckets + "]}";
}

// The FORMAT message of parsing `text`, or "" if it parsed.
std::string format_error(const std::string &text) {
  try {
    TuningProfile::parse(text, "p.json");
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_FORMAT) << e.what();
    return e.what();
  }
  return "";
}

// A one-bucket profile with `field` replaced by `value` (or removed when value is empty).
std::string one_bucket(const std::string &field, const std::string &value) {
  const std::pair<const char *, const char *> fields[] = {
      {"context_min", "0"}, {"context_max", "-1"},   {"batch_min", "1"},
      {"batch_max", "-1"},  {"policy", "\"vegas\""}, {"window_share", "0.5"},
      {"gamma", "6"},       {"ratio", "0.07"},       {"tau", ""},  // optional, absent unless given
      {"mode", ""},         {"speedup", ""},         {"draft_model", ""}};
  std::string bucket;
  for (const auto &f : fields) {
    std::string v = f.first == field ? value : f.second;
    if (v.empty()) continue;
    bucket += std::string(bucket.empty() ? "" : ",") + "\"" + f.first + "\":" + v;
  }
  return "{\"format\":\"vegas-profile/1\",\"backend\":\"cpu\",\"buckets\":[{" + bucket + "}]}";
}

TEST(TuningProfile, StandardGridLooksUpEveryBucket) {
  auto p = TuningProfile::parse(standard_profile(), "grid.json");
  EXPECT_EQ(p->backend(), "cuda");
  EXPECT_EQ(p->source(), "grid.json");
  ASSERT_EQ(p->buckets().size(), 12u);
  const int64_t contexts[] = {0, 4095, 4096, 8191, 8192, 16383, 16384, 1000000};
  const int64_t batches[] = {1, 4, 5, 16, 17, 4096};
  for (int64_t context : contexts)
    for (int64_t batch : batches) {
      const int c = context < 4096 ? 0 : context < 8192 ? 1 : context < 16384 ? 2 : 3;
      const int b = batch <= 4 ? 0 : batch <= 16 ? 1 : 2;
      EXPECT_EQ(p->lookup(context, batch).gamma, gamma_of(c, b))
          << "context " << context << " batch " << batch;
    }
  EXPECT_EQ(p->max_gamma(), 12);
}

TEST(TuningProfile, NoMatchTakesNearestByContextThenBatch) {
  // Holes: context [1000, 2000) and [5000, 6000); batch [2, 3] and [8, 8].
  const std::string text = R"({"format":"vegas-profile/1","backend":"cpu","buckets":[
    {"context_min":1000,"context_max":2000,"batch_min":2,"batch_max":3,"policy":"vegas","gamma":1,"ratio":0.1},
    {"context_min":1000,"context_max":2000,"batch_min":8,"batch_max":8,"policy":"vegas","gamma":2,"ratio":0.1},
    {"context_min":5000,"context_max":6000,"batch_min":2,"batch_max":3,"policy":"vegas","gamma":3,"ratio":0.1},
    {"context_min":5000,"context_max":6000,"batch_min":2,"batch_max":3,"policy":"streaming","gamma":4,"ratio":0.1}]})";
  auto p = TuningProfile::parse(text, "holes.json");
  EXPECT_EQ(p->lookup(1500, 2).gamma, 1);  // inside
  EXPECT_EQ(p->lookup(1500, 7).gamma, 2);  // context matches both; batch 7 is nearer 8
  EXPECT_EQ(p->lookup(1500, 5).gamma, 1);  // batch 5: 2 from 3, 3 from 8
  EXPECT_EQ(p->lookup(0, 100).gamma, 2);   // context nearest the first two; batch nearer 8
  EXPECT_EQ(p->lookup(3000, 2).gamma, 1);  // 1000 past 1999, 2000 before 5000
  EXPECT_EQ(p->lookup(4000, 2).gamma, 3);  // nearer 5000; overlapping buckets: file order
  EXPECT_EQ(p->lookup(1 << 30, 1).gamma, 3);
  // Three of four buckets say vegas: the session takes the first of them.
  EXPECT_EQ(p->session_bucket().policy, "vegas");
  EXPECT_EQ(p->session_bucket().gamma, 1);
}

TEST(TuningProfile, OptionalAndUnknownKeys) {
  auto p = TuningProfile::parse(one_bucket("window_share", ""), "p.json");
  EXPECT_FLOAT_EQ(p->buckets()[0].window_share, 0.5f);
  EXPECT_EQ(p->buckets()[0].tau, 0.0);    // unknown: auto mode refines without a trust band
  EXPECT_FALSE(p->buckets()[0].vanilla);  // no "mode": vegas
  EXPECT_EQ(p->buckets()[0].speedup, 0.0);
  p = TuningProfile::parse(one_bucket("mode", "\"vanilla\""), "p.json");
  EXPECT_TRUE(p->buckets()[0].vanilla);
  p = TuningProfile::parse(one_bucket("speedup", "0.8"), "p.json");
  EXPECT_FLOAT_EQ(static_cast<float>(p->buckets()[0].speedup), 0.8f);
  p = TuningProfile::parse(one_bucket("policy", "\"lookup\""), "p.json");  // prompt lookup
  EXPECT_EQ(p->buckets()[0].policy, "lookup");
  p = TuningProfile::parse(one_bucket("policy", "\"streaming+lookup\""), "p.json");
  EXPECT_EQ(p->buckets()[0].policy, "streaming+lookup");
  for (const char *bad : {"\"lookup+lookup\"", "\"nope+lookup\"", "\"+lookup\""})
    EXPECT_THROW(TuningProfile::parse(one_bucket("policy", bad), "p.json"), Error) << bad;
  EXPECT_EQ(TuningProfile::parse(one_bucket("tau", ""), "p.json")->buckets()[0].draft_model_gamma,
            0);  // no "draft_model": not measured
  p = TuningProfile::parse(
      one_bucket("draft_model", R"({"gamma":12,"tau":2.5,"tokens_per_s":900,"speedup":0.8})"),
      "p.json");
  EXPECT_EQ(p->buckets()[0].draft_model_gamma, 12);
  EXPECT_FLOAT_EQ(static_cast<float>(p->buckets()[0].draft_model_tau), 2.5f);
  EXPECT_EQ(p->max_gamma(), 12);  // the draft model's γ sizes a session's buffers too
  EXPECT_FLOAT_EQ(static_cast<float>(p->buckets()[0].draft_model_speedup), 0.8f);
  // Vanilla was faster than the draft model there, and no "mode": vanilla
  // for a session with that draft, the model's own drafting for the others.
  EXPECT_TRUE(p->buckets()[0].vanilla_for(true));
  EXPECT_FALSE(p->buckets()[0].vanilla_for(false));
  p = TuningProfile::parse(one_bucket("mode", "\"vanilla\""), "p.json");
  EXPECT_TRUE(p->buckets()[0].vanilla_for(false));
  EXPECT_FALSE(p->buckets()[0].vanilla_for(true));  // the draft model was not measured
  p = TuningProfile::parse(one_bucket("draft_model", R"({"gamma":4,"speedup":1.4})"), "p.json");
  EXPECT_FALSE(p->buckets()[0].vanilla_for(true));
  p = TuningProfile::parse(one_bucket("tau", "5.4"), "p.json");
  EXPECT_FLOAT_EQ(static_cast<float>(p->buckets()[0].tau),
                  5.4f);  // read as a float, like the others
  p = TuningProfile::parse(
      R"({"format":"vegas-profile/1","backend":"cpu","future":{"x":1},"buckets":[
      {"context_min":0,"context_max":-1,"batch_min":1,"batch_max":-1,"policy":"streaming",
       "window_share":0.25,"gamma":3,"ratio":0.2,"extra":[1,2]}]})",
      "p.json");
  const TuningBucket &b = p->buckets()[0];
  EXPECT_EQ(b.policy, "streaming");
  EXPECT_FLOAT_EQ(b.window_share, 0.25f);
  EXPECT_EQ(b.gamma, 3);
  EXPECT_FLOAT_EQ(b.ratio, 0.2f);
  EXPECT_EQ(b.context_max, -1);
  EXPECT_EQ(b.batch_max, -1);
}

TEST(TuningProfile, MissingRequiredFieldsNameFileAndField) {
  for (const char *field :
       {"context_min", "context_max", "batch_min", "batch_max", "policy", "gamma", "ratio"}) {
    const std::string message = format_error(one_bucket(field, ""));
    EXPECT_NE(message.find("p.json"), std::string::npos) << message;
    EXPECT_NE(message.find(std::string("buckets[0].") + field + " is missing"), std::string::npos)
        << message;
  }
}

TEST(TuningProfile, OutOfRangeValuesAreFormatErrors) {
  const std::pair<const char *, const char *> cases[] = {
      {"context_min", "-1"},
      {"context_min", "1.5"},
      {"context_max", "0"},
      {"context_max", "-2"},
      {"batch_min", "0"},
      {"batch_max", "0"},
      {"policy", "\"user\""},
      {"policy", "\"auto\""},
      {"policy", "\"nope\""},
      {"policy", "7"},
      {"window_share", "1.5"},
      {"window_share", "-0.1"},
      {"gamma", "0"},
      {"gamma", "33"},
      {"gamma", "6.5"},
      {"ratio", "0"},
      {"ratio", "1.01"},
      {"ratio", "\"0.07\""},
      {"tau", "0.5"},
      {"tau", "40"},
      {"gamma", "99999999999999999999"},
      {"mode", "\"fast\""},
      {"mode", "1"},
      {"speedup", "-1"},
      {"draft_model", "3"},
      {"draft_model", "{}"},
      {"draft_model", R"({"gamma":0})"},
      {"draft_model", R"({"gamma":40})"},
      {"draft_model", R"({"gamma":3,"tau":0.5})"}};
  for (const auto &c : cases) {
    const std::string message = format_error(one_bucket(c.first, c.second));
    EXPECT_NE(message.find(std::string("buckets[0].") + c.first), std::string::npos)
        << c.first << "=" << c.second << ": " << message;
  }
}

TEST(TuningProfile, CorruptFilesAreFormatErrors) {
  const char *cases[] = {
      "",
      "{",
      "[]",
      "{\"format\":\"vegas-profile/1\",\"backend\":\"cpu\",\"buckets\":[{\"gamma\":6",
      R"({"backend":"cpu","buckets":[]})",
      R"({"format":"vegas-profile/2","backend":"cpu","buckets":[]})",
      R"({"format":"vegas-profile/1","backend":"tpu","buckets":[]})",
      R"({"format":"vegas-profile/1","buckets":[]})",
      R"({"format":"vegas-profile/1","backend":"cpu","buckets":[]})",
      R"({"format":"vegas-profile/1","backend":"cpu","buckets":{}})",
      R"({"format":"vegas-profile/1","backend":"cpu","buckets":[7]})",
  };
  for (const char *text : cases) {
    const std::string message = format_error(text);
    EXPECT_NE(message.find("p.json"), std::string::npos) << text << ": " << message;
  }
}

vegas_status status_of(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e.status();
  }
  return VEGAS_OK;
}

TEST(TuningProfile, ResolveNamedDefaultAndBuiltin) {
  test::TempDir dir;
  // No file anywhere: the built-in table.
  auto p = TuningProfile::resolve("", dir.path(), "cpu");
  EXPECT_EQ(p->source(), "built-in");
  ASSERT_EQ(p->buckets().size(), 1u);
  EXPECT_EQ(p->buckets()[0].policy, "vegas");
  EXPECT_EQ(p->buckets()[0].gamma, 6);
  EXPECT_FLOAT_EQ(p->buckets()[0].ratio, 0.07f);
  EXPECT_EQ(TuningProfile::resolve("", "", "cpu")->source(), "built-in");
  // A named file that is missing: IO; one of another backend: INVALID_ARGUMENT.
  EXPECT_EQ(status_of([&] { TuningProfile::resolve(dir.path() + "/none.json", "", "cpu"); }),
            VEGAS_ERR_IO);
  const std::string cuda = dir.write("cuda.json", standard_profile("cuda"));
  EXPECT_EQ(status_of([&] { TuningProfile::resolve(cuda, "", "cpu"); }),
            VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(TuningProfile::resolve(cuda, "", "cuda")->source(), cuda);
  const std::string bad = dir.write("bad.json", "{\"format\":");
  EXPECT_EQ(status_of([&] { TuningProfile::resolve(bad, "", "cpu"); }), VEGAS_ERR_FORMAT);
  // The model directory's vegas-profile.json: used on its backend, skipped on another.
  const std::string own = dir.write("vegas-profile.json", standard_profile("cuda"));
  EXPECT_EQ(TuningProfile::resolve("", dir.path(), "cuda")->source(), own);
  EXPECT_EQ(TuningProfile::resolve("", dir.path(), "cpu")->source(), "built-in");
  // A named file wins over the model directory's.
  const std::string cpu = dir.write("cpu.json", standard_profile("cpu"));
  EXPECT_EQ(TuningProfile::resolve(cpu, dir.path(), "cpu")->source(), cpu);
  // A corrupt default file is an error, not silently ignored.
  dir.write("vegas-profile.json", "not json");
  EXPECT_EQ(status_of([&] { TuningProfile::resolve("", dir.path(), "cuda"); }), VEGAS_ERR_FORMAT);
}

// A session with a draft model and an automatic γ starts where the bucket's
// "draft_model" says (trusting its τ); without one, or with a fixed γ, as
// before; a bucket with no draft-model γ starts a draft model at its own γ.
TEST(TuningProfile, DraftModelSessionsStartAtTheDraftModelGamma) {
  const auto profile = TuningProfile::parse(
      R"({"format":"vegas-profile/1","backend":"cpu","buckets":[
      {"context_min":0,"context_max":4096,"batch_min":1,"batch_max":-1,"policy":"vegas",
       "gamma":6,"ratio":0.07,"tau":5.0,"draft_model":{"gamma":3,"tau":2.2}},
      {"context_min":4096,"context_max":-1,"batch_min":1,"batch_max":-1,"policy":"vegas",
       "gamma":8,"ratio":0.05}]})",
      "p.json");
  AutoKnobs autos;
  autos.gamma = autos.ratio = autos.policy = true;
  FixedKnobs fixed;
  const RefinementConfig refinement;
  const AutoTuning sparse(autos, fixed, profile, refinement);
  EXPECT_EQ(sparse.start(1000, 4).gamma, 6);
  EXPECT_DOUBLE_EQ(sparse.start(1000, 4).controller->expected_tau(), 5.0);
  fixed.draft_model = true;
  const AutoTuning model(autos, fixed, profile, refinement);
  EXPECT_EQ(model.start(1000, 4).gamma, 3);
  EXPECT_FLOAT_EQ(static_cast<float>(model.start(1000, 4).controller->expected_tau()), 2.2f);
  EXPECT_EQ(model.start(9000, 4).gamma, 8);  // no draft-model γ measured there
  EXPECT_DOUBLE_EQ(model.start(9000, 4).controller->expected_tau(),
                   0.0);  // the sparse τ is not its
  autos.gamma = false;
  fixed.gamma = 5;
  EXPECT_EQ(AutoTuning(autos, fixed, profile, refinement).start(1000, 4).gamma, 5);
}

}  // namespace
}  // namespace vegas
