// A separate draft model (vegas_session_options.draft_model) on the CPU
// backend: with the model itself as its draft every draft is accepted (the
// draft's KV, catch-up and positions line up with the target's); with a
// layer-skip draft (the embedded model's first 2 layers) greedy output equals
// vanilla on public prompts, with and without a sliding window, in auto mode
// (vanilla steps between rounds) and through the prefix cache; sampled runs
// are reproducible; bad combinations are refused with a message.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layer_skip_model.h"
#include "model/model.h"
#include "session/session.h"
#include "speculative_test_data.h"
#include "support/model_dir.h"
#include "support/session_run.h"
#include "tiny_checkpoint.h"
#include "vegas.h"

namespace vegas {
namespace {

std::shared_ptr<Model> &shared_model() {
  return test::shared_cpu_model(test::embedded_model_dir());
}

std::shared_ptr<Model> load_cpu(const std::string &dir) {
  ModelLoadOptions options;
  options.backend_auto = false;
  return Model::load(dir, options);
}

std::shared_ptr<Model> &layer_skip_draft() {
  static std::shared_ptr<Model> model = load_cpu(test::layer_skip_dir(2));
  return model;
}

using test::with_draft;

// Proves the plumbing: the model drafting for itself has every draft of
// every round accepted, greedy and sampled (its draft rows compute what the
// verify rows do), and the output is vanilla's.
TEST(DraftModel, TheModelAsItsOwnDraftIsAlwaysAccepted) {
  const std::vector<int32_t> prompt = test::fibonacci_prompt(*shared_model());
  const std::vector<int32_t> reference =
      test::session_tokens(shared_model(), SessionParams{}, prompt, 40);
  SequenceStats stats;
  EXPECT_EQ(test::session_tokens(shared_model(), with_draft(shared_model()), prompt, 40, &stats),
            reference);
  EXPECT_GT(stats.rounds, 0);
  EXPECT_EQ(stats.accepted, stats.drafted);
  EXPECT_EQ(stats.committed, stats.accepted + stats.rounds);
}

// Proves greedy losslessness with a weaker draft: on a public 2K prompt, a
// 2-layer draft (full attention and a 256-token window) gives vanilla's 64
// tokens, and really rejects drafts.
TEST(DraftModel, LayerSkipDraftEqualsVanillaOnAPublicPrompt) {
  if (!test::have_model_and_prompts()) GTEST_SKIP() << "embedded model or public prompts absent";
  const auto prompts = test::load_public_prompts(shared_model()->tokenizer(), "-2k");
  ASSERT_GE(prompts.size(), 2u);
  for (size_t i = 1; i < 2; ++i) {
    const std::vector<int32_t> reference =
        test::session_tokens(shared_model(), SessionParams{}, prompts[i].ids, 64);
    for (const int32_t window : {0, 256}) {
      SequenceStats stats;
      EXPECT_EQ(test::session_tokens(shared_model(), with_draft(layer_skip_draft(), window),
                                     prompts[i].ids, 64, &stats),
                reference)
          << prompts[i].id << " window " << window;
      EXPECT_GT(stats.drafted, stats.accepted);
      EXPECT_EQ(stats.committed, stats.accepted + stats.rounds);
      std::printf("[ %s ] 2-layer draft, window %d: %.2f tokens a round\n", prompts[i].id.c_str(),
                  window, static_cast<double>(stats.committed) / stats.rounds);
    }
  }
}

// Proves the draft catches up on tokens it has not seen: in auto mode the
// session mixes vanilla steps and rounds (the vanilla steps write only the
// model's KV), and two sequences share a prompt through the prefix cache;
// each output is still vanilla's.
TEST(DraftModel, CatchUpAfterVanillaStepsAndCachedPrefixes) {
  const std::vector<int32_t> prompt = test::fibonacci_prompt(*shared_model());
  const std::vector<int32_t> reference =
      test::session_tokens(shared_model(), SessionParams{}, prompt, 48);
  SessionParams sp = with_draft(layer_skip_draft());
  sp.auto_mode = true;
  EXPECT_EQ(test::session_tokens(shared_model(), sp, prompt, 48), reference) << "auto mode";
  Session session(shared_model(), with_draft(layer_skip_draft()));
  for (int k = 0; k < 2; ++k) {
    SequenceRequest req;
    req.prompt.assign(prompt.begin(), prompt.end());
    req.max_tokens = 48;
    req.ignore_eos = true;
    const int32_t id = session.submit(std::move(req));
    session.run();
    const Sequence &seq = session.sequence(id);
    ASSERT_EQ(seq.status, VEGAS_OK);
    EXPECT_EQ(std::vector<int32_t>(seq.tokens.begin() + seq.n_prompt(), seq.tokens.end()),
              reference)
        << "sequence " << k;
  }
}

// Proves sampled draft-model rounds (penalties on) are reproducible from the
// seed and count what they commit.
TEST(DraftModel, SampledRunsAreReproducible) {
  const std::vector<int32_t> prompt = test::fibonacci_prompt(*shared_model());
  SamplingParams sampling;
  sampling.temperature = 0.8f;
  sampling.top_k = 20;
  sampling.repetition_penalty = 1.1f;
  sampling.seed = 5;
  std::vector<int32_t> runs[2];
  for (auto &out : runs) {
    SequenceStats st;
    out = test::sampled_session_tokens(shared_model(), with_draft(layer_skip_draft(), 64), prompt,
                                       40, sampling, &st);
    EXPECT_EQ(st.committed, st.accepted + st.rounds);
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0].size(), 40u);
}

// Proves a draft deeper than the model works with a window (its window sets
// have one entry per draft layer): a random 10-layer draft of the same
// vocabulary, 32 wide, rejects nearly everything and the output is vanilla's.
TEST(DraftModel, ADeeperRandomDraftWithAWindow) {
  const std::string dir = ::testing::TempDir() + "vegas-deep-draft";
  std::filesystem::create_directories(dir);
  nlohmann::json config = test::tiny_config_json("Qwen3ForCausalLM");
  config["vocab_size"] = shared_model()->config().vocab_size;
  config["num_hidden_layers"] = 10;
  test::write_tiny_model(dir, config, 3);
  std::filesystem::copy_file(test::embedded_model_dir() + "/tokenizer.json",
                             dir + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  const std::vector<int32_t> prompt = test::fibonacci_prompt(*shared_model());
  const std::vector<int32_t> reference =
      test::session_tokens(shared_model(), SessionParams{}, prompt, 24);
  SequenceStats stats;
  EXPECT_EQ(test::session_tokens(shared_model(), with_draft(load_cpu(dir), 8), prompt, 24, &stats),
            reference);
  EXPECT_GT(stats.rounds, 0);
}

// The fibonacci prompt, and a public 2K prompt's first 600 tokens where the
// public prompts are at hand.
std::vector<std::vector<int32_t>> fibonacci_and_public_prompt() {
  std::vector<std::vector<int32_t>> prompts = {test::fibonacci_prompt(*shared_model())};
  if (test::have_model_and_prompts()) {
    auto ids = test::load_public_prompts(shared_model()->tokenizer(), "-2k").at(0).ids;
    ids.resize(600);
    prompts.push_back(ids);
  }
  return prompts;
}

// Proves the hybrid "P+model" (each round drafts by the draft model or by
// P's sparse passes, whichever has paid more; P selects after every round)
// is lossless: greedy output equals vanilla's on the fibonacci prompt and a
// public 2K prompt's first 600 tokens, with the model as its own draft (its
// rounds always accepted) and with the layer-skip draft.
TEST(DraftModel, HybridWithTheSparsePassesIsLossless) {
  for (const auto &prompt : fibonacci_and_public_prompt()) {
    const std::vector<int32_t> reference =
        test::session_tokens(shared_model(), SessionParams{}, prompt, 48);
    for (const auto &draft : {shared_model(), layer_skip_draft()}) {
      SessionParams sp = with_draft(draft);
      sp.spec.policy = "vegas+model";
      SequenceStats stats;
      EXPECT_EQ(test::session_tokens(shared_model(), sp, prompt, 48, &stats), reference);
      EXPECT_EQ(stats.committed, stats.accepted + stats.rounds);
    }
  }
}

// Proves "P@model" (SpecAttn: P's sparse passes on sets the draft model's
// attention picks at each round's start, the verify pass capturing nothing)
// is lossless: greedy output equals vanilla's with the model as its own
// draft and with the layer-skip draft, on the fibonacci prompt and a public
// 2K prompt's first 600 tokens; and that the draft's scores did select, in
// every round but the first (whose sets the prefill's capture made). It
// prints what each draft's sets let the sparse passes accept.
TEST(DraftModel, SparseSetsPickedByTheDraftAreLossless) {
  for (const auto &prompt : fibonacci_and_public_prompt()) {
    const std::vector<int32_t> reference =
        test::session_tokens(shared_model(), SessionParams{}, prompt, 48);
    std::vector<int64_t> accepted;
    for (const auto &draft : {shared_model(), layer_skip_draft()}) {
      SessionParams sp = with_draft(draft);
      sp.spec.policy = "vegas@model";
      SequenceStats stats;
      SpeculativeTotals totals;
      EXPECT_EQ(test::sampled_session_tokens(shared_model(), sp, prompt, 48, SamplingParams{},
                                             &stats, &totals),
                reference);
      EXPECT_GT(stats.rounds, 1);
      EXPECT_EQ(totals.selections, stats.rounds - 1) << "a selection at every round's start";
      EXPECT_EQ(stats.committed, stats.accepted + stats.rounds);
      accepted.push_back(stats.accepted);
    }
    std::printf("accepted with the model's own scores %lld, the layer-skip draft's %lld\n",
                static_cast<long long>(accepted[0]), static_cast<long long>(accepted[1]));
  }
}

vegas_status create_with_draft(vegas_model *model, vegas_model *draft, const char *policy,
                               int32_t tree_branches, int32_t window, std::string *message) {
  vegas_session_options o;
  vegas_session_options_init(&o);
  o.mode = VEGAS_MODE_VEGAS;
  o.policy = policy;
  o.draft_model = draft;
  o.draft_window = window;
  o.tree_branches = tree_branches;
  o.tree_depth = tree_branches > 1 ? 1 : 0;
  o.kv_bytes = 32 << 20;
  vegas_session *session = nullptr;
  const vegas_status st = vegas_session_create(model, &o, &session);
  *message = vegas_last_error();
  vegas_session_free(session);
  return st;
}

// Proves the ABI takes a draft model and keeps it alive past the caller's
// free, and refuses with a message: another vocabulary, prompt lookup, token
// trees, a negative window.
TEST(DraftModel, AbiChecksAndKeepsTheDraft) {
  vegas_model_options mo;
  vegas_model_options_init(&mo);
  mo.backend = VEGAS_BACKEND_CPU;
  vegas_model *model = nullptr, *draft = nullptr, *other = nullptr;
  ASSERT_EQ(vegas_model_load(test::embedded_model_dir().c_str(), &mo, &model), VEGAS_OK);
  ASSERT_EQ(vegas_model_load(test::layer_skip_dir(2).c_str(), &mo, &draft), VEGAS_OK);
  const std::string tiny = ::testing::TempDir() + "vegas-tiny-draft";
  std::filesystem::create_directories(tiny);
  // The same tokenizer, but an embedding of 8200 rows: another vocabulary.
  nlohmann::json tiny_config = test::tiny_config_json("Qwen3ForCausalLM");
  tiny_config["vocab_size"] = 8200;
  test::write_tiny_model(tiny, tiny_config, 7);
  std::filesystem::copy_file(test::embedded_model_dir() + "/tokenizer.json",
                             tiny + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_EQ(vegas_model_load(tiny.c_str(), &mo, &other), VEGAS_OK) << vegas_last_error();
  std::string msg;
  EXPECT_EQ(create_with_draft(model, other, "vegas", 1, 0, &msg), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("vocabulary"), std::string::npos) << msg;
  EXPECT_EQ(create_with_draft(model, draft, "lookup", 1, 0, &msg), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(create_with_draft(model, draft, "vegas", 2, 0, &msg), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("draft model"), std::string::npos) << msg;
  EXPECT_EQ(create_with_draft(model, draft, "vegas", 1, -1, &msg), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(create_with_draft(model, draft, "model+model", 1, 0, &msg), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(create_with_draft(model, draft, "vegas+model", 2, 0, &msg),
            VEGAS_ERR_INVALID_ARGUMENT);  // no trees in a hybrid
  EXPECT_EQ(create_with_draft(model, nullptr, "vegas+model", 1, 0, &msg),
            VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("draft model"), std::string::npos) << msg;
  EXPECT_EQ(create_with_draft(model, draft, "streaming+model", 1, 0, &msg), VEGAS_OK) << msg;
  EXPECT_EQ(create_with_draft(model, draft, "vegas@model", 1, 0, &msg), VEGAS_OK) << msg;
  EXPECT_EQ(create_with_draft(model, nullptr, "vegas@model", 1, 0, &msg),
            VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("draft model"), std::string::npos) << msg;
  EXPECT_EQ(create_with_draft(model, draft, "lookup@model", 1, 0, &msg),
            VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(create_with_draft(model, draft, "full@model", 1, 0, &msg),
            VEGAS_ERR_INVALID_ARGUMENT);  // selects nothing
  EXPECT_NE(msg.find("attention scores"), std::string::npos) << msg;
  // A session made with the draft runs after the caller freed its handle.
  vegas_session_options o;
  vegas_session_options_init(&o);
  o.mode = VEGAS_MODE_VEGAS;
  o.draft_model = draft;
  o.kv_bytes = 32 << 20;
  vegas_session *session = nullptr;
  ASSERT_EQ(vegas_session_create(model, &o, &session), VEGAS_OK) << vegas_last_error();
  vegas_model_free(draft);
  const std::vector<int32_t> prompt = test::fibonacci_prompt(*shared_model());
  vegas_request req;
  vegas_request_init(&req);
  req.prompt = prompt.data();
  req.n_prompt = prompt.size();
  req.max_tokens = 16;
  req.ignore_eos = 1;
  int32_t seq = -1;
  ASSERT_EQ(vegas_session_submit(session, &req, &seq), VEGAS_OK);
  EXPECT_EQ(vegas_session_run(session), VEGAS_OK) << vegas_last_error();
  vegas_sequence_info info;
  info.struct_size = sizeof(info);
  ASSERT_EQ(vegas_sequence_get_info(session, seq, &info), VEGAS_OK);
  EXPECT_EQ(info.n_generated, 16);
  vegas_session_free(session);
  vegas_model_free(other);
  vegas_model_free(model);
}

}  // namespace
}  // namespace vegas
