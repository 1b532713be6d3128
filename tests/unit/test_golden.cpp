// Golden tests: the CPU backend against Hugging Face transformers with f32
// math, on the fixtures that tools/make_fixtures.py writes into tests/fixtures/
// (tiny random models of every supported architecture and rope variant, and
// greedy continuations of the embedded model on the public 2K prompts).
//
// A missing fixture is a failure, not a skip: only when the whole fixtures
// directory is absent do these tests skip, loudly.
#include <gtest/gtest.h>

#include <cctype>
#include <iostream>
#include <memory>

#include "support/golden.h"

namespace vegas {
namespace {

using namespace golden;  // NOLINT: the fixture helpers

class GoldenTiny : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!fixtures_present()) GTEST_SKIP() << "fixtures directory absent: " << fixtures_dir();
    dir_ = fixtures_dir() + "/" + GetParam();
    ASSERT_TRUE(fs::exists(dir_ + "/fixture.json"))
        << "golden fixture " << dir_ << " is missing: run tools/make_fixtures.py";
    model_ = std::make_unique<GoldenModel>(dir_, 128, 128, /*scatter_pages=*/true);
    fixture_ = load_tiny_fixture(dir_, model_->vocab());
  }

  // Feeds the prompt in the given chunk sizes (all rows' logits) and compares
  // every row with the reference.
  void expect_prompt_logits(const std::vector<int32_t> &chunks, const char *how) {
    const int32_t vocab = model_->vocab();
    float worst = 0;
    size_t worst_at = 0, bad = 0;
    size_t row = 0;
    for (int32_t n : chunks) {
      ASSERT_LE(row + static_cast<size_t>(n), fixture_.prompt.size());
      const float *got = model_->forward(&fixture_.prompt[row], n, SeqRows::Logits::kAll);
      for (size_t i = 0; i < static_cast<size_t>(n) * static_cast<size_t>(vocab); ++i) {
        const size_t at = row * static_cast<size_t>(vocab) + i;
        const float err = std::fabs(got[i] - fixture_.logits[at]);
        if (!(err <= kLogitTolerance)) ++bad;  // also counts NaN
        if (!std::isnan(worst) && (std::isnan(err) || err > worst)) {
          worst = err;
          worst_at = at;
        }
      }
      row += static_cast<size_t>(n);
    }
    ASSERT_EQ(row, fixture_.prompt.size()) << "chunks do not cover the prompt";
    EXPECT_EQ(bad, 0u) << bad << " logits off by more than " << kLogitTolerance << "; worst "
                       << worst << " at position " << worst_at / static_cast<size_t>(vocab)
                       << ", token " << worst_at % static_cast<size_t>(vocab);
    std::cout << "[golden] " << GetParam() << " " << how << ": max |logit error| " << worst
              << " over " << fixture_.prompt.size() << " positions\n";
  }

  std::string dir_;
  std::unique_ptr<GoldenModel> model_;
  TinyFixture fixture_;
};

// Proves one prefill of the whole 64-token prompt gives transformers' f32
// logits at every position (embedding, norms, projections with their biases,
// q/k norm, rope variant, GQA, causal attention, SwiGLU, lm_head or tied head).
TEST_P(GoldenTiny, PrefillLogitsMatchReference) {
  expect_prompt_logits({static_cast<int32_t>(fixture_.prompt.size())}, "one prefill");
}

// Proves prefill in uneven chunks (rows attending to K/V written by earlier
// calls, across scattered pages) gives the same logits as the reference.
TEST_P(GoldenTiny, ChunkedPrefillLogitsMatchReference) {
  const auto n = static_cast<int32_t>(fixture_.prompt.size());
  expect_prompt_logits({1, 6, 17, n - 24}, "chunked prefill");
}

// Proves the one-token decode path gives the reference logits at every position.
TEST_P(GoldenTiny, DecodeStepLogitsMatchReference) {
  expect_prompt_logits(std::vector<int32_t>(fixture_.prompt.size(), 1), "decode steps");
}

// Proves 32 greedy decode steps after the prompt choose transformers' tokens
// (steps with a reference margin under 1e-4 are not compared and say so).
TEST_P(GoldenTiny, GreedyContinuationMatchesReference) {
  const float *logits = model_->prefill(fixture_.prompt, 64);
  const GreedyReport r =
      check_greedy(*model_, logits, fixture_.greedy_ids, fixture_.greedy_margins, kTinyMarginFloor);
  EXPECT_EQ(r.mismatches, 0) << r.first_mismatch;
  EXPECT_GE(r.compared * 2, static_cast<int32_t>(fixture_.greedy_ids.size()))
      << "too few steps with a clear reference margin: the fixture tests little";
  std::cout << "[golden] " << GetParam() << ": greedy " << r.compared << "/"
            << fixture_.greedy_ids.size() << " steps compared, " << r.skipped
            << " skipped (margin < " << kTinyMarginFloor << ")\n";
}

std::string param_name(const ::testing::TestParamInfo<std::string> &info) {
  std::string name = info.param;
  for (char &c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenTiny, ::testing::ValuesIn(tiny_fixture_names()),
                         param_name);

// ------------------------------------------------------------ embedded model

// Proves the embedded model, on the CPU with f32 math, continues every public
// 2K prompt greedily exactly as transformers does with f32 math, step for step
// (teacher-forced with the reference tokens), wherever the reference's
// top1 - top2 margin is at least 0.005. Prints how many steps were compared.
TEST(GoldenEmbedded, Greedy2kMatchesF32Reference) {
  if (!fixtures_present()) GTEST_SKIP() << "fixtures directory absent: " << fixtures_dir();
  const std::string path = fixtures_dir() + "/embedded/greedy_2k.json";
  ASSERT_TRUE(fs::exists(path)) << "golden fixture " << path
                                << " is missing: run tools/make_fixtures.py";
  const json prompts = read_json(path);
  ASSERT_TRUE(prompts.is_array() && !prompts.empty()) << path << ": no prompts";

  size_t longest = 0, longest_gen = 0;
  for (const auto &p : prompts) {
    longest = std::max(longest, p.at("prompt_ids").size());
    longest_gen = std::max(longest_gen, p.at("f32").at("ids").size());
  }
  GoldenModel model(model_dir(), static_cast<int32_t>(longest + longest_gen), 512,
                 /*scatter_pages=*/false);

  int32_t total_compared = 0, total_steps = 0;
  for (const auto &p : prompts) {
    const std::string id = p.at("id").get<std::string>();
    SCOPED_TRACE(id);
    const auto prompt = read_ids(p.at("prompt_ids"), path + " " + id, model.vocab());
    const auto ref = read_ids(p.at("f32").at("ids"), path + " " + id + " f32.ids", model.vocab());
    const auto margins = read_margins(p.at("f32").at("margins"), path + " " + id, ref.size());

    model.reset();
    const float *logits = model.prefill(prompt, 512);
    const GreedyReport r = check_greedy(model, logits, ref, margins, kEmbeddedMarginFloor);
    EXPECT_EQ(r.mismatches, 0) << r.first_mismatch;
    EXPECT_GE(r.compared * 2, static_cast<int32_t>(ref.size()))
        << "too few steps with a clear reference margin";
    std::cout << "[golden] " << id << ": " << prompt.size() << " prompt tokens, " << r.compared
              << "/" << ref.size() << " greedy steps compared";
    if (r.first_skipped >= 0) {
      std::cout << " (" << r.skipped << " skipped with margin < " << kEmbeddedMarginFloor
                << ", the first at step " << r.first_skipped << ")";
    }
    std::cout << "\n";
    total_compared += r.compared;
    total_steps += static_cast<int32_t>(ref.size());
  }
  std::cout << "[golden] embedded 2K: " << total_compared << "/" << total_steps
            << " greedy steps compared over " << prompts.size() << " prompts\n";
}

}  // namespace
}  // namespace vegas
