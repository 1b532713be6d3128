// Every function of vegas.h against bad arguments: NULL for each pointer
// argument (table-driven), option structs with a too-small struct_size, zero
// or negative sizes and counts in every option struct. Each must return a
// clear status with a message (or, where vegas.h says so, a documented
// neutral value), never crash. A larger struct from a "newer header" (extra
// trailing fields the library does not know) must work like the current one.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "support/abi_model.h"
#include "vegas.h"

namespace {

const std::string kModelDir = std::string(VEGAS_SOURCE_DIR) + "/models/vegas-code-22m";

class AbiArgumentErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(vegas::test::load_cpu_model(kModelDir, &model_, 1), VEGAS_OK) << vegas_last_error();
    tok_ = vegas_model_tokenizer(model_);
    vegas_session_options so;
    vegas_session_options_init(&so);
    so.kv_bytes = 8u << 20;
    ASSERT_EQ(vegas_session_create(model_, &so, &session_), VEGAS_OK) << vegas_last_error();
    ASSERT_EQ(vegas_detokenizer_create(tok_, 0, &detok_), VEGAS_OK);
  }
  static void TearDownTestSuite() {
    vegas_detokenizer_free(detok_);
    vegas_session_free(session_);
    vegas_model_free(model_);
  }

  // A finished sequence of `n` greedy tokens; returns its id.
  static int32_t finished_sequence(const vegas_request *request) {
    int32_t seq = -1;
    EXPECT_EQ(vegas_session_submit(session_, request, &seq), VEGAS_OK) << vegas_last_error();
    EXPECT_EQ(vegas_session_run(session_), VEGAS_OK) << vegas_last_error();
    return seq;
  }

  static vegas_model *model_;
  static const vegas_tokenizer *tok_;
  static vegas_session *session_;
  static vegas_detokenizer *detok_;
};

vegas_model *AbiArgumentErrors::model_ = nullptr;
const vegas_tokenizer *AbiArgumentErrors::tok_ = nullptr;
vegas_session *AbiArgumentErrors::session_ = nullptr;
vegas_detokenizer *AbiArgumentErrors::detok_ = nullptr;

const int32_t kPrompt[] = {1, 2, 3, 4};

void expect_error(vegas_status got, vegas_status want, const std::string &what) {
  EXPECT_EQ(got, want) << what << ": " << vegas_status_name(got) << " (" << vegas_last_error()
                       << ")";
  if (want != VEGAS_OK) {
    EXPECT_STRNE(vegas_last_error(), "") << what << ": no message";
  }
}

// Proves that NULL in each pointer argument of each status-returning function
// is INVALID_ARGUMENT with a message (one row per argument).
TEST_F(AbiArgumentErrors, NullForEveryPointerArgument) {
  vegas_request req;
  vegas_request_init(&req);
  req.prompt = kPrompt;
  req.n_prompt = 4;
  req.max_tokens = 2;
  const int32_t seq = finished_sequence(&req);
  int32_t id = 0, ids[8] = {0};
  size_t n = 0;
  char buf[64];
  double bw = 0;
  vegas_tokenizer *tok_out = nullptr;
  vegas_model *model_out = nullptr;
  vegas_session *session_out = nullptr;
  vegas_detokenizer *detok_out = nullptr;
  vegas_model_info mi;
  mi.struct_size = sizeof mi;
  vegas_special_tokens st;
  st.struct_size = sizeof st;
  vegas_sequence_info si;
  si.struct_size = sizeof si;
  vegas_session_stats ss;
  ss.struct_size = sizeof ss;
  vegas_token_logprobs lp;
  lp.struct_size = sizeof lp;
  const std::string model_dir = kModelDir;
  const char *dir = model_dir.c_str();

  struct Row {
    const char *what;
    std::function<vegas_status()> call;
  };
  const char *roles[1] = {"user"}, *contents[1] = {"hi"}, *no_role[1] = {nullptr};
  const std::vector<Row> rows = {
      {"tokenizer_load path", [&] { return vegas_tokenizer_load(nullptr, &tok_out); }},
      {"tokenizer_load out", [&] { return vegas_tokenizer_load(dir, nullptr); }},
      {"tokenize tokenizer", [&] { return vegas_tokenize(nullptr, "a", 1, nullptr, ids, 8, &n); }},
      {"tokenize text", [&] { return vegas_tokenize(tok_, nullptr, 1, nullptr, ids, 8, &n); }},
      {"tokenize ids", [&] { return vegas_tokenize(tok_, "abc", 3, nullptr, nullptr, 8, &n); }},
      {"tokenize n_ids", [&] { return vegas_tokenize(tok_, "a", 1, nullptr, ids, 8, nullptr); }},
      {"detokenize tokenizer", [&] { return vegas_detokenize(nullptr, ids, 1, 0, buf, 64, &n); }},
      {"detokenize ids", [&] { return vegas_detokenize(tok_, nullptr, 1, 0, buf, 64, &n); }},
      {"detokenize text", [&] { return vegas_detokenize(tok_, kPrompt, 4, 0, nullptr, 64, &n); }},
      {"detokenize n_bytes", [&] { return vegas_detokenize(tok_, ids, 1, 0, buf, 64, nullptr); }},
      {"token_to_piece tokenizer", [&] { return vegas_token_to_piece(nullptr, 1, buf, 64, &n); }},
      {"token_to_piece bytes", [&] { return vegas_token_to_piece(tok_, 300, nullptr, 64, &n); }},
      {"token_to_piece n_bytes", [&] { return vegas_token_to_piece(tok_, 1, buf, 64, nullptr); }},
      {"token_by_name tokenizer", [&] { return vegas_token_by_name(nullptr, "a", &id); }},
      {"token_by_name name", [&] { return vegas_token_by_name(tok_, nullptr, &id); }},
      {"token_by_name id", [&] { return vegas_token_by_name(tok_, "a", nullptr); }},
      {"chat_tokenize tokenizer",
       [&] { return vegas_chat_tokenize(nullptr, roles, contents, 1, 1, ids, 8, &n); }},
      {"chat_tokenize roles",
       [&] { return vegas_chat_tokenize(tok_, nullptr, contents, 1, 1, ids, 8, &n); }},
      {"chat_tokenize contents",
       [&] { return vegas_chat_tokenize(tok_, roles, nullptr, 1, 1, ids, 8, &n); }},
      {"chat_tokenize a role",
       [&] { return vegas_chat_tokenize(tok_, no_role, contents, 1, 1, ids, 8, &n); }},
      {"chat_tokenize n_ids",
       [&] { return vegas_chat_tokenize(tok_, roles, contents, 1, 1, ids, 8, nullptr); }},
      {"special_tokens tokenizer", [&] { return vegas_tokenizer_special_tokens(nullptr, &st); }},
      {"special_tokens out", [&] { return vegas_tokenizer_special_tokens(tok_, nullptr); }},
      {"detokenizer_create tokenizer",
       [&] { return vegas_detokenizer_create(nullptr, 0, &detok_out); }},
      {"detokenizer_create out", [&] { return vegas_detokenizer_create(tok_, 0, nullptr); }},
      {"detokenizer_push detokenizer",
       [&] { return vegas_detokenizer_push(nullptr, 1, buf, 64, &n); }},
      {"detokenizer_push text",
       [&] { return vegas_detokenizer_push(detok_, 300, nullptr, 64, &n); }},
      {"detokenizer_push n_bytes",
       [&] { return vegas_detokenizer_push(detok_, 1, buf, 64, nullptr); }},
      {"detokenizer_flush detokenizer",
       [&] { return vegas_detokenizer_flush(nullptr, buf, 64, &n); }},
      {"detokenizer_flush n_bytes",
       [&] { return vegas_detokenizer_flush(detok_, buf, 64, nullptr); }},
      {"model_load dir", [&] { return vegas_model_load(nullptr, nullptr, &model_out); }},
      {"model_load out", [&] { return vegas_model_load(dir, nullptr, nullptr); }},
      {"model_get_info model", [&] { return vegas_model_get_info(nullptr, &mi); }},
      {"model_get_info out", [&] { return vegas_model_get_info(model_, nullptr); }},
      {"measure_bandwidth model", [&] { return vegas_model_measure_bandwidth(nullptr, &bw); }},
      {"measure_bandwidth out", [&] { return vegas_model_measure_bandwidth(model_, nullptr); }},
      {"session_create model",
       [&] { return vegas_session_create(nullptr, nullptr, &session_out); }},
      {"session_create out", [&] { return vegas_session_create(model_, nullptr, nullptr); }},
      {"session_submit session", [&] { return vegas_session_submit(nullptr, &req, &id); }},
      {"session_submit request", [&] { return vegas_session_submit(session_, nullptr, &id); }},
      {"session_submit seq_id", [&] { return vegas_session_submit(session_, &req, nullptr); }},
      {"session_step session", [&] { return vegas_session_step(nullptr, &id); }},
      {"session_run session", [&] { return vegas_session_run(nullptr); }},
      {"session_cancel session", [&] { return vegas_session_cancel(nullptr, -1); }},
      {"sequence_get_info session", [&] { return vegas_sequence_get_info(nullptr, seq, &si); }},
      {"sequence_get_info out", [&] { return vegas_sequence_get_info(session_, seq, nullptr); }},
      {"sequence_tokens session", [&] { return vegas_sequence_tokens(nullptr, seq, ids, 8, &n); }},
      {"sequence_tokens ids", [&] { return vegas_sequence_tokens(session_, seq, nullptr, 8, &n); }},
      {"sequence_tokens n_ids",
       [&] { return vegas_sequence_tokens(session_, seq, ids, 8, nullptr); }},
      {"sequence_text session", [&] { return vegas_sequence_text(nullptr, seq, buf, 64, &n); }},
      {"sequence_text n_bytes",
       [&] { return vegas_sequence_text(session_, seq, buf, 64, nullptr); }},
      {"sequence_get_logprobs session",
       [&] { return vegas_sequence_get_logprobs(nullptr, seq, 0, &lp); }},
      {"sequence_get_logprobs out",
       [&] { return vegas_sequence_get_logprobs(session_, seq, 0, nullptr); }},
      {"sequence_release session", [&] { return vegas_sequence_release(nullptr, seq); }},
      {"session_get_stats session", [&] { return vegas_session_get_stats(nullptr, &ss); }},
      {"session_get_stats out", [&] { return vegas_session_get_stats(session_, nullptr); }},
      {"generate model", [&] { return vegas_generate(nullptr, "a", nullptr, buf, 64, &n); }},
      {"generate prompt", [&] { return vegas_generate(model_, nullptr, nullptr, buf, 64, &n); }},
      {"generate n_bytes", [&] { return vegas_generate(model_, "a", nullptr, buf, 64, nullptr); }},
  };
  for (const Row &row : rows) expect_error(row.call(), VEGAS_ERR_INVALID_ARGUMENT, row.what);
  // Nothing was handed out by a failed call.
  EXPECT_EQ(tok_out, nullptr);
  EXPECT_EQ(model_out, nullptr);
  EXPECT_EQ(session_out, nullptr);
  EXPECT_EQ(detok_out, nullptr);
  EXPECT_EQ(vegas_sequence_release(session_, seq), VEGAS_OK);
}

// Proves the functions that return no status take NULL as vegas.h documents:
// free functions are no-ops, queries return their neutral value.
TEST_F(AbiArgumentErrors, NullForNonStatusFunctions) {
  vegas_tokenizer_free(nullptr);
  vegas_detokenizer_free(nullptr);
  vegas_model_free(nullptr);
  vegas_session_free(nullptr);
  vegas_tokenize_options_init(nullptr);
  vegas_model_options_init(nullptr);
  vegas_session_options_init(nullptr);
  vegas_sampling_options_init(nullptr);
  vegas_request_init(nullptr);
  vegas_generate_options_init(nullptr);
  EXPECT_EQ(vegas_model_tokenizer(nullptr), nullptr);
  EXPECT_EQ(vegas_token_is_special(nullptr, 0), 0);
  EXPECT_LE(vegas_tokenizer_vocab_size(nullptr), 0);
  EXPECT_NE(vegas_status_name(static_cast<vegas_status>(12345)), nullptr);
  EXPECT_NE(vegas_last_error(), nullptr);
}

// Proves every option struct (input and output) with struct_size 0 or 4 (too
// small to hold a field) is refused with STRUCT_SIZE, not read past its end.
TEST_F(AbiArgumentErrors, StructSizeTooSmall) {
  int32_t ids[8];
  size_t n = 0;
  char buf[64];
  vegas_request done;
  vegas_request_init(&done);
  done.prompt = kPrompt;
  done.n_prompt = 4;
  done.max_tokens = 1;
  const int32_t finished = finished_sequence(&done);
  for (uint32_t size : {0u, 4u}) {
    const std::string at = " struct_size " + std::to_string(size);
    vegas_tokenize_options to;
    vegas_tokenize_options_init(&to);
    to.struct_size = size;
    expect_error(vegas_tokenize(tok_, "a", 1, &to, ids, 8, &n), VEGAS_ERR_STRUCT_SIZE,
                 "tokenize_options" + at);
    vegas_model_options mo;
    vegas_model_options_init(&mo);
    mo.struct_size = size;
    vegas_model *m = nullptr;
    expect_error(vegas_model_load(kModelDir.c_str(), &mo, &m), VEGAS_ERR_STRUCT_SIZE,
                 "model_options" + at);
    vegas_session_options so;
    vegas_session_options_init(&so);
    so.struct_size = size;
    vegas_session *s = nullptr;
    expect_error(vegas_session_create(model_, &so, &s), VEGAS_ERR_STRUCT_SIZE,
                 "session_options" + at);
    vegas_request req;
    vegas_request_init(&req);
    req.prompt = kPrompt;
    req.n_prompt = 4;
    vegas_sampling_options sp;
    vegas_sampling_options_init(&sp);
    sp.struct_size = size;
    req.sampling = &sp;
    int32_t seq = -1;
    expect_error(vegas_session_submit(session_, &req, &seq), VEGAS_ERR_STRUCT_SIZE,
                 "sampling_options" + at);
    req.sampling = nullptr;
    req.struct_size = size;
    expect_error(vegas_session_submit(session_, &req, &seq), VEGAS_ERR_STRUCT_SIZE, "request" + at);
    vegas_generate_options go;
    vegas_generate_options_init(&go);
    go.struct_size = size;
    expect_error(vegas_generate(model_, "a", &go, buf, 64, &n), VEGAS_ERR_STRUCT_SIZE,
                 "generate_options" + at);
    vegas_model_info mi;
    mi.struct_size = size;
    expect_error(vegas_model_get_info(model_, &mi), VEGAS_ERR_STRUCT_SIZE, "model_info" + at);
    vegas_special_tokens st;
    st.struct_size = size;
    expect_error(vegas_tokenizer_special_tokens(tok_, &st), VEGAS_ERR_STRUCT_SIZE,
                 "special_tokens" + at);
    vegas_session_stats ss;
    ss.struct_size = size;
    expect_error(vegas_session_get_stats(session_, &ss), VEGAS_ERR_STRUCT_SIZE,
                 "session_stats" + at);
    vegas_sequence_info si;
    si.struct_size = size;
    expect_error(vegas_sequence_get_info(session_, finished, &si), VEGAS_ERR_STRUCT_SIZE,
                 "sequence_info" + at);
  }
  EXPECT_EQ(vegas_sequence_release(session_, finished), VEGAS_OK);
}

// A struct from a newer header: the current struct followed by fields this
// library does not know. Inputs come from the sized init told the newer size
// (which zeroes the unknown fields); outputs start with a pattern the library
// must overwrite with zeros within struct_size.
template <typename T>
struct Newer {
  T base;
  unsigned char future[40];
};

template <typename T>
Newer<T> newer(void (*init_sized)(T *, size_t)) {
  Newer<T> n;
  std::memset(&n, 0xA5, sizeof n);
  if (init_sized != nullptr)
    init_sized(&n.base, sizeof n);
  else
    n.base.struct_size = sizeof n;
  return n;
}

template <typename T>
bool future_zero(const Newer<T> &n) {
  for (unsigned char c : n.future)
    if (c != 0) return false;
  return true;
}

// Proves structs larger than the library's (a caller built against a newer
// vegas.h) work: inputs whose unknown fields are zero behave as with the
// current size (a non-zero unknown field is UNSUPPORTED, never silently
// ignored); outputs are filled and their unknown trailing bytes zeroed.
TEST_F(AbiArgumentErrors, StructSizeFromNewerHeader) {
  // Inputs: the same greedy generation with current-size and newer structs.
  auto run = [&](const vegas_request *req) {
    const int32_t seq = finished_sequence(req);
    int32_t ids[16];
    size_t n = 0;
    EXPECT_EQ(vegas_sequence_tokens(session_, seq, ids, 16, &n), VEGAS_OK) << vegas_last_error();
    EXPECT_EQ(vegas_sequence_release(session_, seq), VEGAS_OK);
    return std::vector<int32_t>(ids, ids + n);
  };
  vegas_request plain;
  vegas_request_init(&plain);
  plain.prompt = kPrompt;
  plain.n_prompt = 4;
  plain.max_tokens = 6;
  const std::vector<int32_t> want = run(&plain);
  ASSERT_EQ(want.size(), 6u);

  Newer<vegas_sampling_options> sp = newer(vegas_sampling_options_init_sized);
  Newer<vegas_request> req = newer(vegas_request_init_sized);
  req.base.prompt = kPrompt;
  req.base.n_prompt = 4;
  req.base.max_tokens = 6;
  req.base.sampling = &sp.base;
  EXPECT_EQ(run(&req.base), want);

  EXPECT_TRUE(future_zero(req));
  req.future[7] = 1;  // a newer field this library cannot honour
  int32_t unused = -1;
  EXPECT_EQ(vegas_session_submit(session_, &req.base, &unused), VEGAS_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(vegas_last_error()).find("vegas_request"), std::string::npos)
      << vegas_last_error();
  req.future[7] = 0;
  sp.future[39] = 1;
  EXPECT_EQ(vegas_session_submit(session_, &req.base, &unused), VEGAS_ERR_UNSUPPORTED);
  EXPECT_EQ(unused, -1);
  sp.future[39] = 0;

  Newer<vegas_tokenize_options> to = newer(vegas_tokenize_options_init_sized);
  int32_t ids[16];
  size_t n = 0;
  EXPECT_EQ(vegas_tokenize(tok_, "hello", 5, &to.base, ids, 16, &n), VEGAS_OK)
      << vegas_last_error();
  to.future[0] = 1;
  EXPECT_EQ(vegas_tokenize(tok_, "hello", 5, &to.base, ids, 16, &n), VEGAS_ERR_UNSUPPORTED);

  Newer<vegas_model_options> mo = newer(vegas_model_options_init_sized);
  mo.base.backend = VEGAS_BACKEND_CPU;
  mo.base.n_threads = 1;
  vegas_model *m = nullptr;
  EXPECT_EQ(vegas_model_load(kModelDir.c_str(), &mo.base, &m), VEGAS_OK) << vegas_last_error();
  vegas_model_free(m);

  Newer<vegas_session_options> so = newer(vegas_session_options_init_sized);
  so.base.kv_bytes = 4u << 20;
  vegas_session *s = nullptr;
  EXPECT_EQ(vegas_session_create(model_, &so.base, &s), VEGAS_OK) << vegas_last_error();
  vegas_session_free(s);
  so.future[20] = 1;
  s = nullptr;
  EXPECT_EQ(vegas_session_create(model_, &so.base, &s), VEGAS_ERR_UNSUPPORTED);
  EXPECT_EQ(s, nullptr);
  so.future[20] = 0;

  Newer<vegas_generate_options> go = newer(vegas_generate_options_init_sized);
  go.base.max_tokens = 2;
  go.base.session = &so.base;
  char text[256];
  EXPECT_EQ(vegas_generate(model_, "def f", &go.base, text, sizeof text, &n), VEGAS_OK)
      << vegas_last_error();

  // Outputs: filled, struct_size kept, the future bytes zeroed.
  Newer<vegas_model_info> mi = newer<vegas_model_info>(nullptr);
  ASSERT_EQ(vegas_model_get_info(model_, &mi.base), VEGAS_OK) << vegas_last_error();
  EXPECT_EQ(mi.base.n_layers, 8);
  EXPECT_EQ(mi.base.struct_size, sizeof mi);
  EXPECT_TRUE(future_zero(mi));
  Newer<vegas_special_tokens> st = newer<vegas_special_tokens>(nullptr);
  ASSERT_EQ(vegas_tokenizer_special_tokens(tok_, &st.base), VEGAS_OK) << vegas_last_error();
  EXPECT_TRUE(future_zero(st));
  Newer<vegas_session_stats> ss = newer<vegas_session_stats>(nullptr);
  ASSERT_EQ(vegas_session_get_stats(session_, &ss.base), VEGAS_OK) << vegas_last_error();
  EXPECT_EQ(ss.base.rounds, 0);  // vanilla session
  EXPECT_TRUE(future_zero(ss));
  const int32_t seq = finished_sequence(&plain);
  Newer<vegas_sequence_info> si = newer<vegas_sequence_info>(nullptr);
  ASSERT_EQ(vegas_sequence_get_info(session_, seq, &si.base), VEGAS_OK) << vegas_last_error();
  EXPECT_EQ(si.base.n_generated, 6);
  EXPECT_EQ(si.base.finish_reason, VEGAS_FINISH_LENGTH);
  EXPECT_TRUE(future_zero(si));
  EXPECT_EQ(vegas_sequence_release(session_, seq), VEGAS_OK);
}

// Proves zero and negative sizes, counts and out-of-range values in every
// option struct are INVALID_ARGUMENT with a message naming the field.
TEST_F(AbiArgumentErrors, ZeroAndNegativeSizes) {
  struct SessionCase {
    const char *field;
    std::function<void(vegas_session_options *)> set;
  };
  const std::vector<SessionCase> session_cases = {
      {"page_size", [](vegas_session_options *o) { o->page_size = 0; }},
      {"page_size", [](vegas_session_options *o) { o->page_size = -16; }},
      {"max_batch", [](vegas_session_options *o) { o->max_batch = 0; }},
      {"max_batch", [](vegas_session_options *o) { o->max_batch = -1; }},
      {"prefill_chunk", [](vegas_session_options *o) { o->prefill_chunk = 0; }},
      {"prefill_chunk", [](vegas_session_options *o) { o->prefill_chunk = -512; }},
      {"kv_bytes", [](vegas_session_options *o) { o->kv_bytes = 1; }},
      {"kv_bytes", [](vegas_session_options *o) { o->kv_bytes = UINT64_MAX; }},
      {"mode", [](vegas_session_options *o) { o->mode = -1; }},
      {"gamma",  // 0 is "auto" (test_auto_tuning)
       [](vegas_session_options *o) {
         o->mode = VEGAS_MODE_VEGAS;
         o->gamma = -32;
       }},
      {"gamma",
       [](vegas_session_options *o) {
         o->mode = VEGAS_MODE_VEGAS;
         o->gamma = -1;
       }},
      {"gamma",
       [](vegas_session_options *o) {
         o->mode = VEGAS_MODE_VEGAS;
         o->gamma = VEGAS_MAX_GAMMA + 1;
       }},
      {"ratio",
       [](vegas_session_options *o) {
         o->mode = VEGAS_MODE_VEGAS;
         o->ratio = -0.5f;
       }},
      {"min_tokens",
       [](vegas_session_options *o) {
         o->mode = VEGAS_MODE_VEGAS;
         o->min_tokens = -1;
       }},
      {"window_share",
       [](vegas_session_options *o) {
         o->mode = VEGAS_MODE_VEGAS;
         o->window_share = -0.1f;
       }},
      {"window_share",
       [](vegas_session_options *o) {
         o->mode = VEGAS_MODE_VEGAS;
         o->window_share = 1.5f;
       }},
      {"sink",
       [](vegas_session_options *o) {
         o->mode = VEGAS_MODE_VEGAS;
         o->policy = "streaming";
         o->sink = -1;
       }},
      {"score_kind",
       [](vegas_session_options *o) {
         o->mode = VEGAS_MODE_VEGAS;
         o->score_kind = 7;
       }},
  };
  for (const SessionCase &c : session_cases) {
    vegas_session_options so;
    vegas_session_options_init(&so);
    so.kv_bytes = 4u << 20;
    c.set(&so);
    vegas_session *s = nullptr;
    const vegas_status status = vegas_session_create(model_, &so, &s);
    expect_error(status, VEGAS_ERR_INVALID_ARGUMENT, std::string("session ") + c.field);
    EXPECT_NE(std::string(vegas_last_error()).find(c.field), std::string::npos)
        << vegas_last_error() << " does not name " << c.field;
    EXPECT_EQ(s, nullptr);
    vegas_session_free(s);
  }

  vegas_model_options mo;
  vegas_model_options_init(&mo);
  mo.n_threads = -1;
  vegas_model *m = nullptr;
  expect_error(vegas_model_load(kModelDir.c_str(), &mo, &m), VEGAS_ERR_INVALID_ARGUMENT,
               "model n_threads");
  // Thread counts past the cap: 100000 crashed the load and 2^31 - 1 made
  // libgomp exit the host process before the cap (issue P1 hostile clients).
  for (const int32_t threads : {1025, 100000, 2147483647}) {
    mo.n_threads = threads;
    expect_error(vegas_model_load(kModelDir.c_str(), &mo, &m), VEGAS_ERR_INVALID_ARGUMENT,
                 "model n_threads " + std::to_string(threads));
    EXPECT_NE(std::string(vegas_last_error()).find("n_threads"), std::string::npos)
        << vegas_last_error();
    EXPECT_EQ(m, nullptr);
  }
  mo.n_threads = 1;
  mo.backend = 99;
  expect_error(vegas_model_load(kModelDir.c_str(), &mo, &m), VEGAS_ERR_INVALID_ARGUMENT,
               "model backend");

  struct SamplingCase {
    const char *field;
    std::function<void(vegas_sampling_options *)> set;
  };
  const std::vector<SamplingCase> sampling_cases = {
      {"top_k", [](vegas_sampling_options *o) { o->top_k = -1; }},
      {"top_p", [](vegas_sampling_options *o) { o->top_p = 0.0f; }},
      {"top_p", [](vegas_sampling_options *o) { o->top_p = -0.5f; }},
      {"min_p", [](vegas_sampling_options *o) { o->min_p = -0.1f; }},
      {"temperature", [](vegas_sampling_options *o) { o->temperature = -1.0f; }},
      {"repetition_penalty", [](vegas_sampling_options *o) { o->repetition_penalty = 0.0f; }},
      {"repetition_penalty", [](vegas_sampling_options *o) { o->repetition_penalty = -2.0f; }},
      {"penalty_last_n", [](vegas_sampling_options *o) { o->penalty_last_n = -2; }},
  };
  for (const SamplingCase &c : sampling_cases) {
    vegas_sampling_options sp;
    vegas_sampling_options_init(&sp);
    c.set(&sp);
    vegas_request req;
    vegas_request_init(&req);
    req.prompt = kPrompt;
    req.n_prompt = 4;
    req.sampling = &sp;
    int32_t seq = -1;
    expect_error(vegas_session_submit(session_, &req, &seq), VEGAS_ERR_INVALID_ARGUMENT,
                 std::string("sampling ") + c.field);
    EXPECT_NE(std::string(vegas_last_error()).find(c.field), std::string::npos)
        << vegas_last_error() << " does not name " << c.field;
  }

  vegas_request req;
  vegas_request_init(&req);
  req.prompt = kPrompt;
  req.n_prompt = 0;
  int32_t seq = -1;
  expect_error(vegas_session_submit(session_, &req, &seq), VEGAS_ERR_INVALID_ARGUMENT,
               "request n_prompt 0");
  req.n_prompt = 4;
  req.max_tokens = -1;
  expect_error(vegas_session_submit(session_, &req, &seq), VEGAS_ERR_INVALID_ARGUMENT,
               "request max_tokens -1");
  req.max_tokens = 4;
  req.n_stop_ids = 2;  // with stop_ids NULL
  expect_error(vegas_session_submit(session_, &req, &seq), VEGAS_ERR_INVALID_ARGUMENT,
               "request n_stop_ids without stop_ids");
  req.n_stop_ids = 0;
  req.n_stop_strings = 1;  // with stop_strings NULL
  expect_error(vegas_session_submit(session_, &req, &seq), VEGAS_ERR_INVALID_ARGUMENT,
               "request n_stop_strings without stop_strings");

  vegas_generate_options go;
  vegas_generate_options_init(&go);
  go.max_tokens = -1;
  char text[64];
  size_t n = 0;
  expect_error(vegas_generate(model_, "a", &go, text, sizeof text, &n), VEGAS_ERR_INVALID_ARGUMENT,
               "generate max_tokens -1");

  // Zero-capacity buffers follow the buffer convention, they are not errors of their own.
  int32_t ids[1];
  expect_error(vegas_tokenize(tok_, "hello world", 11, nullptr, ids, 0, &n),
               VEGAS_ERR_BUFFER_TOO_SMALL, "tokenize capacity 0");
  EXPECT_GT(n, 0u);
}

// Proves a stop string longer than anything the sequence outputs never
// matches, holds nothing back at the end, and leaves the text identical to the
// text of the same request without it.
// The model's borrowed tokenizer passed to vegas_tokenizer_free: nothing is
// freed (the call used to delete a member of the model handle and abort),
// and the tokenizer still works afterwards.
TEST_F(AbiArgumentErrors, FreeingTheBorrowedTokenizerIsANoOp) {
  vegas_tokenizer_free(const_cast<vegas_tokenizer *>(tok_));
  ASSERT_EQ(vegas_model_tokenizer(model_), tok_);
  int32_t ids[16];
  size_t n = 0;
  ASSERT_EQ(vegas_tokenize(tok_, "def f():", 8, nullptr, ids, 16, &n), VEGAS_OK)
      << vegas_last_error();
  EXPECT_GT(n, 0u);
  EXPECT_GT(vegas_tokenizer_vocab_size(tok_), 0);
}

TEST_F(AbiArgumentErrors, StopStringLongerThanOutput) {
  vegas_request req;
  vegas_request_init(&req);
  req.prompt = kPrompt;
  req.n_prompt = 4;
  req.max_tokens = 8;
  auto text_of = [&](const vegas_request *r, int32_t *finish) {
    const int32_t seq = finished_sequence(r);
    char buf[4096];
    size_t n = 0;
    EXPECT_EQ(vegas_sequence_text(session_, seq, buf, sizeof buf, &n), VEGAS_OK);
    vegas_sequence_info info;
    info.struct_size = sizeof info;
    EXPECT_EQ(vegas_sequence_get_info(session_, seq, &info), VEGAS_OK);
    *finish = info.finish_reason;
    EXPECT_EQ(vegas_sequence_release(session_, seq), VEGAS_OK);
    return std::string(buf, n);
  };
  int32_t finish_plain = 0, finish_stop = 0;
  const std::string plain = text_of(&req, &finish_plain);
  ASSERT_FALSE(plain.empty());
  // Starts with the real output, so a prefix match is pending until the end.
  const std::string long_stop = plain + std::string(5000, 'x');
  const char *stops[] = {long_stop.c_str()};
  req.stop_strings = stops;
  req.n_stop_strings = 1;
  EXPECT_EQ(text_of(&req, &finish_stop), plain);
  EXPECT_EQ(finish_stop, finish_plain);
}

}  // namespace

namespace {

struct LogprobsSeen {
  vegas_session *session = nullptr;
  int32_t calls = 0;
  int32_t entries = 0;  // of the token just committed, read inside the callback
};

int32_t read_logprobs_in_callback(int32_t seq_id, int32_t token, const char *, size_t, void *user) {
  auto *seen = static_cast<LogprobsSeen *>(user);
  vegas_token_logprobs lp;
  lp.struct_size = sizeof lp;
  if (vegas_sequence_get_logprobs(seen->session, seq_id, seen->calls, &lp) == VEGAS_OK &&
      lp.token == token)
    ++seen->entries;
  ++seen->calls;
  return 0;
}

}  // namespace

// Proves the logprobs request fields and vegas_sequence_get_logprobs: out of
// range top_logprobs and top_logprobs without logprobs are refused at submit;
// a sequence without logprobs is WRONG_STATE, an index past the end
// NOT_FOUND, a too-small struct_size STRUCT_SIZE; a token's entry can be read
// from its own callback; a struct from an older header (only the fields up to
// n_top) gets exactly those.
TEST_F(AbiArgumentErrors, Logprobs) {
  vegas_request req;
  vegas_request_init(&req);
  req.prompt = kPrompt;
  req.n_prompt = 4;
  req.max_tokens = 3;
  req.ignore_eos = 1;
  int32_t id = -1;
  req.logprobs = 1;
  req.top_logprobs = VEGAS_MAX_TOP_LOGPROBS + 1;
  expect_error(vegas_session_submit(session_, &req, &id), VEGAS_ERR_INVALID_ARGUMENT,
               "top_logprobs 21");
  req.top_logprobs = -1;
  expect_error(vegas_session_submit(session_, &req, &id), VEGAS_ERR_INVALID_ARGUMENT,
               "top_logprobs -1");
  req.logprobs = 0;
  req.top_logprobs = 2;
  expect_error(vegas_session_submit(session_, &req, &id), VEGAS_ERR_INVALID_ARGUMENT,
               "top_logprobs without logprobs");
  req.logprobs = 3;
  req.top_logprobs = 0;
  expect_error(vegas_session_submit(session_, &req, &id), VEGAS_ERR_INVALID_ARGUMENT,
               "logprobs 3 (not a vegas_logprobs_kind)");

  req.logprobs = 0;
  const int32_t plain = finished_sequence(&req);
  vegas_token_logprobs lp;
  lp.struct_size = sizeof lp;
  expect_error(vegas_sequence_get_logprobs(session_, plain, 0, &lp), VEGAS_ERR_WRONG_STATE,
               "sequence without logprobs");

  LogprobsSeen seen;
  seen.session = session_;
  req.logprobs = 1;
  req.top_logprobs = 3;
  req.on_token = read_logprobs_in_callback;
  req.user_data = &seen;
  const int32_t seq = finished_sequence(&req);
  EXPECT_EQ(seen.calls, 3);
  EXPECT_EQ(seen.entries, 3);
  for (int64_t index : {int64_t{-1}, int64_t{3}})
    expect_error(vegas_sequence_get_logprobs(session_, seq, index, &lp), VEGAS_ERR_NOT_FOUND,
                 "index " + std::to_string(index));
  expect_error(vegas_sequence_get_logprobs(session_, 12345, 0, &lp), VEGAS_ERR_NOT_FOUND,
               "no such sequence");
  lp.struct_size = 4;
  expect_error(vegas_sequence_get_logprobs(session_, seq, 0, &lp), VEGAS_ERR_STRUCT_SIZE,
               "struct_size 4");
  lp.struct_size = sizeof lp;
  ASSERT_EQ(vegas_sequence_get_logprobs(session_, seq, 0, &lp), VEGAS_OK) << vegas_last_error();
  EXPECT_EQ(lp.n_top, 3);
  EXPECT_LE(lp.logprob, 0.0f);

  // An older caller's struct: the library writes only what it states.
  unsigned char bytes[sizeof(vegas_token_logprobs)];
  std::memset(bytes, 0xAB, sizeof bytes);
  auto *small = reinterpret_cast<vegas_token_logprobs *>(bytes);
  small->struct_size = offsetof(vegas_token_logprobs, top_ids);
  ASSERT_EQ(vegas_sequence_get_logprobs(session_, seq, 0, small), VEGAS_OK) << vegas_last_error();
  EXPECT_EQ(small->token, lp.token);
  EXPECT_EQ(small->n_top, 3);
  for (size_t i = offsetof(vegas_token_logprobs, top_ids); i < sizeof bytes; ++i)
    ASSERT_EQ(bytes[i], 0xAB) << "byte " << i << " past the caller's struct was written";
  EXPECT_EQ(vegas_sequence_release(session_, plain), VEGAS_OK);
  EXPECT_EQ(vegas_sequence_release(session_, seq), VEGAS_OK);
}
