// The threading contract of vegas.h, exercised through the C API on the CPU:
// one model shared by several sessions generating at once on several threads,
// vegas_session_cancel from another thread while the session runs, and token
// callbacks that call back into the library (allowed: queries and cancel;
// refused with WRONG_STATE: step/run/submit/release; ignored: free). Also built
// under TSan by tools/sanitize.sh.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "support/abi_model.h"
#include "vegas.h"

namespace {

const std::string kModelDir = std::string(VEGAS_SOURCE_DIR) + "/models/vegas-code-22m";

vegas_model *load_model(int32_t n_threads) {
  vegas_model *model = nullptr;
  EXPECT_EQ(vegas::test::load_cpu_model(kModelDir, &model, n_threads), VEGAS_OK)
      << vegas_last_error();
  return model;
}

vegas_session *new_session(vegas_model *model) {
  vegas_session_options so;
  vegas_session_options_init(&so);
  so.kv_bytes = 16u << 20;
  vegas_session *s = nullptr;
  EXPECT_EQ(vegas_session_create(model, &so, &s), VEGAS_OK) << vegas_last_error();
  return s;
}

std::vector<int32_t> prompt_of(int i) {
  return {10 + i, 200 + 7 * i, 31, 400 + i, 5};
}

// Greedy tokens of one request in its own session on `model`.
std::vector<int32_t> generate(vegas_model *model, const std::vector<int32_t> &prompt,
                              int32_t max_tokens) {
  vegas_session *s = new_session(model);
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

// Proves a model is shareable: four threads, each with its own session on the
// same model, generate at once and get exactly the tokens each request gets
// alone (greedy is deterministic, so any interference would show).
TEST(AbiThreads, OneModelManySessionsAtOnce) {
  // One OpenMP thread per call: the concurrency under test is the callers'
  // threads (libgomp's own barriers are invisible to TSan).
  vegas_model *model = load_model(1);
  ASSERT_NE(model, nullptr);
  constexpr int kThreads = 4;
  constexpr int32_t kTokens = 12;
  std::vector<std::vector<int32_t>> alone(kThreads), together(kThreads);
  for (int i = 0; i < kThreads; ++i) alone[i] = generate(model, prompt_of(i), kTokens);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] { together[i] = generate(model, prompt_of(i), kTokens); });
  for (std::thread &t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_EQ(alone[i].size(), static_cast<size_t>(kTokens)) << "request " << i;
    EXPECT_EQ(together[i], alone[i]) << "request " << i;
  }
  vegas_model_free(model);
}

struct CancelState {
  std::atomic<int32_t> tokens{0};
};

int32_t count_tokens(int32_t, int32_t, const char *, size_t, void *user) {
  static_cast<CancelState *>(user)->tokens.fetch_add(1);
  return 0;
}

// Proves cancel(-1) names the sequences submitted before it: on an idle
// session it used to wait for the next step and cancel a sequence submitted
// after it (issue P1 hostile clients).
TEST(AbiThreads, CancelAllSparesSequencesSubmittedAfterIt) {
  vegas_model *model = load_model(1);
  ASSERT_NE(model, nullptr);
  vegas_session *s = new_session(model);
  const std::vector<int32_t> prompt = prompt_of(1);
  vegas_request req;
  vegas_request_init(&req);
  req.prompt = prompt.data();
  req.n_prompt = prompt.size();
  req.max_tokens = 4;
  req.ignore_eos = 1;
  ASSERT_EQ(vegas_session_cancel(s, -1), VEGAS_OK);  // idle: nothing to cancel
  int32_t before = -1, after = -1;
  ASSERT_EQ(vegas_session_submit(s, &req, &before), VEGAS_OK) << vegas_last_error();
  ASSERT_EQ(vegas_session_cancel(s, -1), VEGAS_OK);  // names `before` only
  ASSERT_EQ(vegas_session_submit(s, &req, &after), VEGAS_OK) << vegas_last_error();
  ASSERT_EQ(vegas_session_run(s), VEGAS_OK) << vegas_last_error();
  vegas_sequence_info info;
  info.struct_size = sizeof info;
  ASSERT_EQ(vegas_sequence_get_info(s, before, &info), VEGAS_OK);
  EXPECT_EQ(info.finish_reason, VEGAS_FINISH_CANCELLED);
  ASSERT_EQ(vegas_sequence_get_info(s, after, &info), VEGAS_OK);
  EXPECT_EQ(info.finish_reason, VEGAS_FINISH_LENGTH);
  EXPECT_EQ(info.n_generated, 4);
  vegas_session_free(s);
  vegas_model_free(model);
}

// Proves vegas_session_cancel from another thread stops a running generation:
// the run returns, the sequence finishes CANCELLED well before max_tokens and
// keeps every token it had committed.
TEST(AbiThreads, CancelFromAnotherThreadWhileRunning) {
  vegas_model *model = load_model(1);
  ASSERT_NE(model, nullptr);
  vegas_session *s = new_session(model);
  const std::vector<int32_t> prompt = prompt_of(0);
  CancelState state;
  vegas_request req;
  vegas_request_init(&req);
  req.prompt = prompt.data();
  req.n_prompt = prompt.size();
  req.max_tokens = 100000;  // far more than the KV pool allows: only cancel ends it early
  req.ignore_eos = 1;
  req.on_token = count_tokens;
  req.user_data = &state;
  int32_t seq = -1;
  ASSERT_EQ(vegas_session_submit(s, &req, &seq), VEGAS_OK) << vegas_last_error();
  std::thread canceller([&] {
    while (state.tokens.load() < 3) std::this_thread::yield();
    EXPECT_EQ(vegas_session_cancel(s, -1), VEGAS_OK);
  });
  EXPECT_EQ(vegas_session_run(s), VEGAS_OK) << vegas_last_error();
  canceller.join();
  vegas_sequence_info info;
  info.struct_size = sizeof info;
  ASSERT_EQ(vegas_sequence_get_info(s, seq, &info), VEGAS_OK);
  EXPECT_EQ(info.finish_reason, VEGAS_FINISH_CANCELLED);
  EXPECT_GE(info.n_generated, 3);
  EXPECT_EQ(info.n_generated, state.tokens.load());
  std::vector<int32_t> ids(static_cast<size_t>(info.n_generated) + 1);
  size_t n = 0;
  EXPECT_EQ(vegas_sequence_tokens(s, seq, ids.data(), ids.size(), &n), VEGAS_OK);
  EXPECT_EQ(n, static_cast<size_t>(info.n_generated));
  vegas_session_free(s);
  vegas_model_free(model);
}

struct Reentry {
  vegas_session *session = nullptr;
  const vegas_request *request = nullptr;
  int calls = 0;
  int32_t last_generated = -1;
  vegas_status info = VEGAS_OK, tokens = VEGAS_OK, text = VEGAS_OK, stats = VEGAS_OK,
               cancel_other = VEGAS_OK;
  vegas_status step = VEGAS_OK, run = VEGAS_OK, submit = VEGAS_OK, release = VEGAS_OK;
  std::string free_message;
};

int32_t reenter(int32_t seq, int32_t, const char *, size_t, void *user) {
  Reentry &r = *static_cast<Reentry *>(user);
  ++r.calls;
  vegas_sequence_info info;
  info.struct_size = sizeof info;
  r.info = vegas_sequence_get_info(r.session, seq, &info);
  r.last_generated = info.n_generated;
  char text[1024];
  size_t n = 0;
  r.text = vegas_sequence_text(r.session, seq, text, sizeof text, &n);
  int32_t ids[64];
  r.tokens = vegas_sequence_tokens(r.session, seq, ids, 64, &n);
  vegas_session_stats stats;
  stats.struct_size = sizeof stats;
  r.stats = vegas_session_get_stats(r.session, &stats);
  r.cancel_other = vegas_session_cancel(r.session, 12345);  // allowed, but no such sequence
  int32_t active = 0, id = -1;
  r.step = vegas_session_step(r.session, &active);
  r.run = vegas_session_run(r.session);
  r.submit = vegas_session_submit(r.session, r.request, &id);
  r.release = vegas_sequence_release(r.session, seq);
  vegas_session_free(r.session);  // must be ignored, with a message
  r.free_message = vegas_last_error();
  return 0;
}

// Proves the callback contract: from inside on_token the queries (info, tokens,
// text, stats) work and cancel is allowed (an unknown id is NOT_FOUND), step/run/submit/release
// fail with WRONG_STATE, and free is ignored with a message, leaving the session usable afterwards.
TEST(AbiThreads, CallbackCallsBackIntoTheLibrary) {
  vegas_model *model = load_model(1);
  ASSERT_NE(model, nullptr);
  vegas_session *s = new_session(model);
  const std::vector<int32_t> prompt = prompt_of(1);
  Reentry r;
  vegas_request req;
  vegas_request_init(&req);
  req.prompt = prompt.data();
  req.n_prompt = prompt.size();
  req.max_tokens = 4;
  req.ignore_eos = 1;
  req.on_token = reenter;
  req.user_data = &r;
  r.session = s;
  r.request = &req;
  int32_t seq = -1;
  ASSERT_EQ(vegas_session_submit(s, &req, &seq), VEGAS_OK) << vegas_last_error();
  ASSERT_EQ(vegas_session_run(s), VEGAS_OK) << vegas_last_error();
  EXPECT_EQ(r.calls, 4);
  EXPECT_EQ(r.info, VEGAS_OK);
  EXPECT_GE(r.last_generated, 3);  // the query sees the sequence as it grows
  EXPECT_EQ(r.text, VEGAS_OK);
  EXPECT_EQ(r.tokens, VEGAS_OK);
  EXPECT_EQ(r.stats, VEGAS_OK);
  EXPECT_EQ(r.cancel_other, VEGAS_ERR_NOT_FOUND);  // callable here: not WRONG_STATE
  EXPECT_EQ(r.step, VEGAS_ERR_WRONG_STATE);
  EXPECT_EQ(r.run, VEGAS_ERR_WRONG_STATE);
  EXPECT_EQ(r.submit, VEGAS_ERR_WRONG_STATE);
  EXPECT_EQ(r.release, VEGAS_ERR_WRONG_STATE);
  EXPECT_NE(r.free_message.find("ignored"), std::string::npos) << r.free_message;
  // The session survived and still works.
  vegas_sequence_info info;
  info.struct_size = sizeof info;
  ASSERT_EQ(vegas_sequence_get_info(s, seq, &info), VEGAS_OK);
  EXPECT_EQ(info.n_generated, 4);
  EXPECT_EQ(info.finish_reason, VEGAS_FINISH_LENGTH);
  req.on_token = nullptr;
  int32_t seq2 = -1;
  EXPECT_EQ(vegas_session_submit(s, &req, &seq2), VEGAS_OK) << vegas_last_error();
  EXPECT_EQ(vegas_session_run(s), VEGAS_OK);
  vegas_session_free(s);
  vegas_model_free(model);
}

}  // namespace
