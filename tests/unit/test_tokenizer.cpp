// Unit tests of the tokenizer's internal C++ API: error reporting for bad
// tokenizer.json files, streaming detokenization, id range checks, token lookup
// and concurrent encoding.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "support/model_dir.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

std::string model_dir() {
  return vegas::test::embedded_model_dir();
}

const vegas::Tokenizer &model_tokenizer() {
  static const auto tok = vegas::Tokenizer::load(model_dir());
  return *tok;
}

// A tiny valid byte-level tokenizer.json: the 256 byte symbols are not all
// needed, only those the tests use ("a", "b", "ab", the UTF-8 bytes of "é").
std::string tiny_json(const std::string &model_override = "",
                      const std::string &pre_tokenizer =
                          R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":true})",
                      const std::string &normalizer = "null",
                      const std::string &decoder = R"({"type":"ByteLevel"})") {
  const std::string model = model_override.empty()
                                ? R"({"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"Ã":3,"©":4,"Ġ":5},
                                     "merges":["a b"]})"
                                : model_override;
  return R"({"version":"1.0","added_tokens":[{"id":6,"content":"<|s|>","special":true}],)"
         R"("normalizer":)" +
         normalizer + R"(,"pre_tokenizer":)" + pre_tokenizer +
         R"(,"post_processor":null,"decoder":)" + decoder + R"(,"model":)" + model + "}";
}

// Expects from_json to throw `status` with a message containing `needle`.
void expect_error(const std::string &json, vegas_status status, const std::string &needle) {
  try {
    vegas::Tokenizer::from_json(json, "");
    FAIL() << "no error; expected " << needle;
  } catch (const vegas::Error &e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Proves the tiny fixture itself is valid, so the error tests below fail for
// the one defect each introduces.
TEST(TokenizerErrors, TinyFixtureLoadsAndMerges) {
  const auto tok = vegas::Tokenizer::from_json(tiny_json(), "");
  EXPECT_EQ(tok->encode("ab", true, true), (std::vector<int32_t>{2}));
  EXPECT_EQ(tok->encode("ab<|s|>", true, true), (std::vector<int32_t>{2, 6}));
  EXPECT_EQ(tok->vocab_size(), 7);
}

// Proves corrupt JSON and missing fields are FORMAT errors naming the problem.
TEST(TokenizerErrors, CorruptJsonAndMissingFields) {
  expect_error("{\"model\": ", VEGAS_ERR_FORMAT, "tokenizer.json is not valid JSON");
  expect_error("[1,2]", VEGAS_ERR_FORMAT, "not a JSON object");
  expect_error(R"({"decoder":{"type":"ByteLevel"}})", VEGAS_ERR_FORMAT, "\"model\" is missing");
  expect_error(tiny_json(R"({"type":"BPE","merges":[]})"), VEGAS_ERR_FORMAT, "model.vocab");
  expect_error(tiny_json(R"({"type":"BPE","vocab":{"a":0}})"), VEGAS_ERR_FORMAT, "model.merges");
  expect_error(tiny_json(R"({"type":"BPE","vocab":{"a":0},"merges":["a"]})"), VEGAS_ERR_FORMAT,
               "merges[0]");
  expect_error(tiny_json(R"({"type":"BPE","vocab":{"a":0,"b":1},"merges":[["a","b"]]})"),
               VEGAS_ERR_FORMAT, "not in the vocabulary");
  expect_error(tiny_json(R"({"type":"BPE","vocab":{"a":-3},"merges":[]})"), VEGAS_ERR_FORMAT,
               "vocab[\"a\"]");
  expect_error(
      tiny_json("", R"({"type":"Split","pattern":{"Regex":"(unclosed"},"behavior":"Isolated"})"),
      VEGAS_ERR_FORMAT, "regex does not compile");
  expect_error(R"({"model":{"type":"BPE","vocab":{},"merges":[]},"decoder":{"type":"ByteLevel"},
                  "added_tokens":[{"content":"x"}]})",
               VEGAS_ERR_FORMAT, "added_tokens[0] has no valid \"id\"");
}

// Proves unknown component types are UNSUPPORTED errors naming the type.
TEST(TokenizerErrors, UnsupportedTypesAreNamed) {
  expect_error(tiny_json(R"({"type":"WordPiece","vocab":{}})"), VEGAS_ERR_UNSUPPORTED,
               "\"WordPiece\"");
  expect_error(tiny_json("", R"({"type":"Metaspace"})"), VEGAS_ERR_UNSUPPORTED, "\"Metaspace\"");
  expect_error(tiny_json("", R"({"type":"ByteLevel"})", R"({"type":"Lowercase"})"),
               VEGAS_ERR_UNSUPPORTED, "\"Lowercase\"");
  expect_error(tiny_json("", R"({"type":"ByteLevel"})", "null", R"({"type":"WordPiece"})"),
               VEGAS_ERR_UNSUPPORTED, "decoder type \"WordPiece\"");
  expect_error(tiny_json("", R"({"type":"Split","pattern":{"String":" "},"behavior":"Sideways"})"),
               VEGAS_ERR_UNSUPPORTED, "\"Sideways\"");
}

// `levels` Sequence wrappers of field `list` around `inner`.
std::string nested(const std::string &list, const std::string &inner, int levels) {
  std::string open, close;
  for (int i = 0; i < levels; ++i) {
    open += R"({"type":"Sequence",")" + list + R"(":[)";
    close += "]}";
  }
  return open + inner + close;
}

// Proves deeply nested JSON is a FORMAT error before anything walks it:
// 100,000 nested Sequences in a component overflowed the loading thread's
// stack (issue P1, hostile files). A few levels still load.
TEST(TokenizerErrors, DeeplyNestedJsonIsRefused) {
  const std::string byte_level = R"({"type":"ByteLevel","add_prefix_space":false})";
  constexpr int kDeep = 100000;
  expect_error(tiny_json("", nested("pretokenizers", byte_level, kDeep)), VEGAS_ERR_FORMAT,
               "tokenizer.json: JSON nests deeper than 64 levels");
  expect_error(tiny_json("", byte_level, nested("normalizers", R"({"type":"NFC"})", kDeep)),
               VEGAS_ERR_FORMAT, "nests deeper");
  expect_error(
      tiny_json("", byte_level, "null", nested("decoders", R"({"type":"ByteLevel"})", kDeep)),
      VEGAS_ERR_FORMAT, "nests deeper");
  // Brackets inside strings do not count.
  const std::string bracket_name = R"({"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"[[[[":3},)"
                                   R"("merges":["a b"]})";
  EXPECT_NO_THROW(vegas::Tokenizer::from_json(tiny_json(bracket_name), ""));
  EXPECT_NO_THROW(
      vegas::Tokenizer::from_json(tiny_json("", nested("pretokenizers", byte_level, 3),
                                            nested("normalizers", R"({"type":"NFC"})", 3),
                                            nested("decoders", R"({"type":"ByteLevel"})", 3)),
                                  ""));
}

// Proves a missing file is an IO error naming the path.
TEST(TokenizerErrors, MissingFileIsIo) {
  try {
    vegas::Tokenizer::load("/nonexistent/dir/tokenizer.json");
    FAIL();
  } catch (const vegas::Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_IO);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir"), std::string::npos);
  }
}

// Proves a character split across tokens comes out whole, once, only when its
// last byte arrives; and flush turns a dangling prefix into one U+FFFD.
TEST(StreamingDetokenizer, MultiByteCharacterAcrossTokens) {
  const auto tok = vegas::Tokenizer::from_json(tiny_json(), "");
  vegas::StreamingDetokenizer d(*tok, false);
  EXPECT_EQ(d.push(0), "a");
  EXPECT_EQ(d.push(3), "");  // 0xC3: first byte of "é"
  EXPECT_EQ(d.push(4), "\xC3\xA9");
  EXPECT_EQ(d.push(3), "");
  EXPECT_EQ(d.flush(), std::string(vegas::utf8::kReplacement));
  EXPECT_EQ(d.flush(), "");
  // A byte that can never complete a character is replaced at once, not held.
  EXPECT_EQ(d.push(4), std::string(vegas::utf8::kReplacement));
}

// Proves the stream's text equals decode() over the real model vocabulary,
// for ids that split CJK characters and emoji across tokens.
TEST(StreamingDetokenizer, MatchesDecodeOnModel) {
  const vegas::Tokenizer &tok = model_tokenizer();
  const std::vector<int32_t> ids =
      tok.encode("你好 👩🏽‍💻 é\n<|endoftext|>x", true, false);
  vegas::StreamingDetokenizer d(tok, true);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = d.push(id);
    EXPECT_TRUE(vegas::utf8::is_valid(piece));
    streamed += piece;
  }
  streamed += d.flush();
  EXPECT_EQ(streamed, tok.decode(ids.data(), ids.size(), true));
  EXPECT_EQ(streamed, "你好 👩🏽‍💻 é\nx");
}

// Proves ids outside [0, vocab_size) are TOKEN_OUT_OF_RANGE everywhere.
TEST(TokenizerIds, OutOfRangeIds) {
  const vegas::Tokenizer &tok = model_tokenizer();
  for (int32_t bad : {-1, tok.vocab_size(), 1 << 30}) {
    EXPECT_THROW(tok.token_bytes(bad), vegas::Error);
    try {
      tok.decode(&bad, 1, false);
      FAIL();
    } catch (const vegas::Error &e) {
      EXPECT_EQ(e.status(), VEGAS_ERR_TOKEN_OUT_OF_RANGE);
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos);
    }
    vegas::StreamingDetokenizer d(tok, false);
    EXPECT_THROW(d.push(bad), vegas::Error);
    EXPECT_FALSE(tok.is_special(bad));
  }
}

// Proves name lookup finds added tokens and vocabulary entries and nothing else.
TEST(TokenizerIds, TokenByName) {
  const vegas::Tokenizer &tok = model_tokenizer();
  EXPECT_EQ(tok.find_token("<|endoftext|>"), 0);
  EXPECT_EQ(tok.find_token("<|fim_prefix|>"), tok.special_ids().fim_prefix);
  EXPECT_GE(tok.find_token("def"), 0);
  EXPECT_EQ(tok.token_bytes(tok.find_token("Ġdef")), " def");
  EXPECT_EQ(tok.find_token("<|no_such_token|>"), -1);
  EXPECT_EQ(tok.find_token(""), -1);
  EXPECT_TRUE(tok.is_special(0));
  EXPECT_FALSE(tok.is_special(tok.find_token("def")));
}

// Proves encode is safe and deterministic from 4 threads sharing one tokenizer
// (and its word cache), cold and warm.
TEST(TokenizerThreads, ConcurrentEncodeIsIdentical) {
  const vegas::Tokenizer &tok = model_tokenizer();
  std::string text;
  for (int i = 0; i < 300; ++i)
    text += "def f" + std::to_string(i) + "(x):\n    return x * " + std::to_string(i * 7) +
            "  # 注释 é\n";
  tok.clear_cache();
  const std::vector<int32_t> expected = tok.encode(text, true, true);
  tok.clear_cache();
  std::vector<std::vector<int32_t>> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        results[t] = tok.encode(text, true, true);
        if (results[t] != expected) return;
      }
    });
  for (auto &th : threads) th.join();
  for (const auto &r : results) EXPECT_EQ(r, expected);
}

// Proves invalid UTF-8 input never crashes and encodes like its U+FFFD repair.
TEST(TokenizerInput, InvalidUtf8IsReplaced) {
  const vegas::Tokenizer &tok = model_tokenizer();
  const std::string bad = "a\xE4\xB8 b\xFF\xED\xA0\x80";
  EXPECT_EQ(vegas::utf8::lossy(bad),
            "a\xEF\xBF\xBD b\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(tok.encode(bad, true, true), tok.encode(vegas::utf8::lossy(bad), true, true));
}

}  // namespace
