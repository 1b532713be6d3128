// The prefix cache's checks through the public ABI, shared by the CPU test
// (tests/unit/test_prefix_cache.cpp) and the CUDA one
// (tests/gpu/test_cuda_prefix_cache.cpp): each loads the embedded model on
// its backend and runs them. Greedy throughout; "fresh" is a session without
// the cache.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "speculative_test_data.h"
#include "tokenizer/tokenizer.h"
#include "vegas.h"

namespace vegas::test {

constexpr int32_t kMaxTokens = 10;

inline void expect_ok(vegas_status status) {
  ASSERT_EQ(status, VEGAS_OK) << vegas_status_name(status) << ": " << vegas_last_error();
}

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;  // per prompt
  std::vector<int64_t> hits;                 // the session's hit tokens after each batch
  int64_t evicted = 0;
};

// Runs `batches` one after another in one session (each batch's prompts
// together), greedy, kMaxTokens each.
inline Outcome run(vegas_model *model, vegas_session_options so,
                   const std::vector<std::vector<std::vector<int32_t>>> &batches) {
  Outcome out;
  vegas_session *session = nullptr;
  expect_ok(vegas_session_create(model, &so, &session));
  std::unique_ptr<vegas_session, void (*)(vegas_session *)> guard(session, vegas_session_free);
  for (const auto &batch : batches) {
    std::vector<int32_t> ids;
    for (const auto &prompt : batch) {
      vegas_request req;
      vegas_request_init(&req);
      req.prompt = prompt.data();
      req.n_prompt = prompt.size();
      req.max_tokens = kMaxTokens;
      req.ignore_eos = 1;
      int32_t id = -1;
      expect_ok(vegas_session_submit(session, &req, &id));
      ids.push_back(id);
    }
    expect_ok(vegas_session_run(session));
    for (int32_t id : ids) {
      std::vector<int32_t> tokens(kMaxTokens);
      size_t n = 0;
      expect_ok(vegas_sequence_tokens(session, id, tokens.data(), tokens.size(), &n));
      tokens.resize(n);
      out.tokens.push_back(tokens);
      expect_ok(vegas_sequence_release(session, id));
    }
    int64_t hit = 0;
    expect_ok(vegas_session_get_cache_stats(session, &hit, &out.evicted));
    out.hits.push_back(hit);
  }
  return out;
}

inline vegas_session_options options(int32_t mode, int32_t prefix_cache) {
  vegas_session_options so;
  vegas_session_options_init(&so);
  so.mode = mode;
  so.gamma = 6;
  so.prefix_cache = prefix_cache;
  return so;
}

// The first n tokens of public prompt `index` of a size ("-2k", "-8k").
inline std::vector<int32_t> public_prompt(const Tokenizer &tokenizer, const char *size,
                                          size_t index, size_t n) {
  std::vector<int32_t> ids = load_public_prompts(tokenizer, size).at(index).ids;
  ids.resize(n);
  return ids;
}

// An editor's second request: the same n tokens with the last five changed
// and three more typed. Its prefix of whole 16-token pages of the n - 5
// shared tokens comes from the cache, in vanilla and in VEGAS mode (greedy,
// lossless: the tokens of a vanilla session without the cache).
inline void check_second_request(vegas_model *model, const Tokenizer &tokenizer, size_t n) {
  const std::vector<int32_t> first = public_prompt(tokenizer, "-8k", 0, n);
  std::vector<int32_t> second(first.begin(), first.end() - 5);
  for (int32_t t : {11, 22, 33, 44, 55, 66, 77, 88}) second.push_back(t);
  const Outcome fresh = run(model, options(VEGAS_MODE_VANILLA, 0), {{second}});
  EXPECT_EQ(fresh.hits[0], 0);
  const int64_t shared_pages = static_cast<int64_t>(n - 5) / 16;
  for (int32_t mode : {VEGAS_MODE_VANILLA, VEGAS_MODE_VEGAS}) {
    const Outcome cached = run(model, options(mode, 1), {{first}, {second}});
    ASSERT_EQ(cached.tokens.size(), 2u);
    EXPECT_EQ(cached.hits[0], 0) << "mode " << mode;
    EXPECT_EQ(cached.hits[1], shared_pages * 16) << "mode " << mode;
    EXPECT_EQ(cached.tokens[1], fresh.tokens[0]) << "mode " << mode;
  }
}

// A pool of 140 pages of 16 tokens. A (1,024 tokens) finishes and leaves 64
// cached pages; then B (A's first 512 tokens, then 512 others) and C (1,024
// other tokens) run together: B holds A's first 32 pages, and C's 65 pages
// must come partly from A's other cached pages. Both give the tokens of a
// session without the cache.
inline void check_eviction(vegas_model *model, const Tokenizer &tokenizer) {
  vegas_model_info info;
  info.struct_size = sizeof(info);
  expect_ok(vegas_model_get_info(model, &info));
  const std::vector<int32_t> a = public_prompt(tokenizer, "-2k", 0, 1024);
  std::vector<int32_t> b(a.begin(), a.begin() + 512);
  const std::vector<int32_t> other = public_prompt(tokenizer, "-2k", 1, 512);
  b.insert(b.end(), other.begin(), other.end());
  const std::vector<int32_t> c = public_prompt(tokenizer, "-2k", 2, 1024);
  const Outcome fresh = run(model, options(VEGAS_MODE_VANILLA, 0), {{b, c}});
  for (int32_t mode : {VEGAS_MODE_VANILLA, VEGAS_MODE_VEGAS}) {
    vegas_session_options small = options(mode, 1);
    small.kv_bytes = uint64_t{140} * 16 * info.kv_bytes_per_token;
    const Outcome cached = run(model, small, {{a}, {b, c}});
    ASSERT_EQ(cached.tokens.size(), 3u);
    EXPECT_EQ(cached.hits[1], 512) << "mode " << mode;
    EXPECT_GT(cached.evicted, 0) << "mode " << mode;
    EXPECT_EQ(cached.tokens[1], fresh.tokens[0]) << "mode " << mode;
    EXPECT_EQ(cached.tokens[2], fresh.tokens[1]) << "mode " << mode;
  }
}

// prefix_cache 0: no hits (and the same tokens); other values are refused.
inline void check_off_and_bad_values(vegas_model *model, const Tokenizer &tokenizer) {
  const std::vector<int32_t> a = public_prompt(tokenizer, "-2k", 0, 200);
  const Outcome off = run(model, options(VEGAS_MODE_VANILLA, 0), {{a}, {a}});
  EXPECT_EQ(off.hits[1], 0);
  EXPECT_EQ(off.tokens[0], off.tokens[1]);
  const Outcome on = run(model, options(VEGAS_MODE_VANILLA, 1), {{a}, {a}});
  EXPECT_EQ(on.hits[1], 192);  // 198 tokens allowed (two left to prefill): 12 pages
  EXPECT_EQ(on.tokens[1], off.tokens[0]);
  vegas_session_options bad = options(VEGAS_MODE_VANILLA, 2);
  vegas_session *session = nullptr;
  EXPECT_EQ(vegas_session_create(model, &bad, &session), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(session, nullptr);
  int64_t hit = -1;
  EXPECT_EQ(vegas_session_get_cache_stats(nullptr, &hit, nullptr), VEGAS_ERR_INVALID_ARGUMENT);
}

}  // namespace vegas::test
