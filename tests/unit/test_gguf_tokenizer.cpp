// The tokenizer built from a GGUF file's tokenizer.* metadata
// (runtime/gguf/gguf_tokenizer.h):
//   - the embedded model's tokenizer as llama.cpp's own converter wrote it
//     (pre type qwen2) into the tiny qwen3 model of
//     tests/fixtures/gguf/tiny-models.tar.xz (tools/gguf/make_fixtures.sh;
//     CMake unpacks it into VEGAS_GGUF_TINY_DIR), must tokenize and decode exactly
//     as the model's own tokenizer.json (Tokenizer::load, itself checked
//     against Hugging Face `tokenizers` ids in tests/fixtures/embedded);
//   - small GGUFs built in memory (support/gguf_builder.h) check the token
//     types, every supported pre type, the config keys, and that bad metadata
//     is FORMAT and unknown tokenizers are UNSUPPORTED, naming the key/value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_tokenizer.h"
#include "speculative_test_data.h"
#include "support/gguf_builder.h"
#include "support/model_dir.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace vegas::gguf {
namespace {

using nlohmann::json;
using test::GgufBuilder;

// ---------------------------------------------------------------------------
// The embedded model's GGUF tokenizer against its tokenizer.json.

std::string fixture_path() {
  return test::gguf_tiny_file("qwen3-bf16");
}

const File &fixture_file() {
  static const std::unique_ptr<File> file = File::open(fixture_path());
  return *file;
}

const Tokenizer &gguf_tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = tokenizer_from_gguf(fixture_file());
  return *tok;
}

const Tokenizer &hf_tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = Tokenizer::load(test::embedded_model_dir());
  return *tok;
}

// Strings where tokenizers tend to differ: normalization, digits, whitespace
// runs, special tokens' text, contractions, scripts, emoji, invalid UTF-8.
const std::vector<std::string> &tricky_strings() {
  static const std::vector<std::string> strings = {
      "",
      "hello world",
      "e\xCC\x81t\xC3\xA9 caf\x65\xCC\x81",                 // e + U+0301 (not NFC), é
      "A\xCC\x8A \xE2\x84\xAB \xC3\x85",                    // Å decomposed, U+212B, U+00C5
      "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8 \xEA\xB0\x81",  // Hangul jamo, composed 각
      "\xEF\xAC\x81 \xC2\xBD x\xC2\xB2",                    // ﬁ ½ x² (NFC keeps them)
      "12345 3.14159 1,000,000 0x1F 007 \xD9\xA1\xD9\xA2\xD9\xA3 1e-9",
      "a  b   c\t\t\td\n\n\ne \r\n\r\n  \n   x   ",
      "   ",
      "\n",
      " \t\n \n\n",
      "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
      "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>  return 1<|file_sep|>",
      "<|endoftext|><|endoftext|>x<|endoftext",
      "<|im_start <|im_end|x <|fim_pad|>",
      "I'VE been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like "
      "some tea? We'Ve a'lL",
      "\xF0\x9F\x9A\x80 (normal) \xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F "
      "\xF0\x9F\xA6\x99\xF0\x9F\xA6\x99",
      "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8"
      "apple\xE5\xB7\xA5\xE4\xBD\x9C"
      "1314151\xE5\xA4\xA9\xEF\xBD\x9E",
      "\xE1\x9E\x80\xE1\x9E\xB6\xE1\x9E\x93\xE1\x9F\x8B\xE1\x9E\x8F\xE1\x9F\x82 "
      "\xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE",
      "ab\xFF\xFE"
      "cd\xC3",  // invalid UTF-8
      "def f(x):\n    return x**2  # comment\n\n\nclass A:\n\tpass\r\n",
      "------======= ''''''```````\"\"\"\"......!!!!!!?????? 3..3 3...3",
  };
  return strings;
}

std::string nfc(const std::string &s) {
  static const Normalizer normalizer(json{{"type", "NFC"}});
  return normalizer.apply(utf8::lossy(s));
}

// Proves the fixture holds what the converter writes for the embedded model:
// gpt2/qwen2, 8192 typed tokens (7 CONTROL), 7929 merges, its special ids.
TEST(EmbeddedGguf, FixtureHoldsTheConvertersMetadata) {
  const File &f = fixture_file();
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens").size(), 8192u);
  EXPECT_EQ(f.get_array("tokenizer.ggml.merges").size(), 7929u);
  const json &types = f.get_array("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 8192u);
  for (size_t i = 0; i < types.size(); ++i) EXPECT_EQ(types[i].get<int>(), i < 7 ? 3 : 1) << i;
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 0);
  EXPECT_EQ(f.get_int("tokenizer.ggml.padding_token_id"), 0);
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 0);
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_bos_token"));
}

// Proves every id decodes to the same bytes, has the same specialness and is
// found by its text, as in the tokenizer.json; and the special ids agree
// (except bos: see below).
TEST(EmbeddedGguf, VocabularyAndSpecialIdsMatchTokenizerJson) {
  const Tokenizer &g = gguf_tokenizer();
  const Tokenizer &h = hf_tokenizer();
  ASSERT_EQ(g.vocab_size(), h.vocab_size());
  const json &tokens = fixture_file().get_array("tokenizer.ggml.tokens");
  for (int32_t id = 0; id < g.vocab_size(); ++id) {
    EXPECT_EQ(g.token_bytes(id), h.token_bytes(id)) << id;
    EXPECT_EQ(g.is_special(id), h.is_special(id)) << id;
    const std::string text = tokens[static_cast<size_t>(id)].get<std::string>();
    EXPECT_EQ(g.find_token(text), id) << text;
    EXPECT_EQ(h.find_token(text), id) << text;
  }
  const SpecialTokenIds &gs = g.special_ids(), &hs = h.special_ids();
  EXPECT_EQ(gs.eos, hs.eos);
  EXPECT_EQ(gs.pad, hs.pad);
  EXPECT_EQ(gs.im_start, hs.im_start);
  EXPECT_EQ(gs.im_end, hs.im_end);
  EXPECT_EQ(gs.fim_prefix, hs.fim_prefix);
  EXPECT_EQ(gs.fim_middle, hs.fim_middle);
  EXPECT_EQ(gs.fim_suffix, hs.fim_suffix);
  EXPECT_EQ(gs.file_sep, hs.file_sep);
  // The one metadata difference: tokenizer_config.json has bos_token null, but
  // the converter also reads config.json's bos_token_id (0). add_bos_token is
  // false in both, so no encoding differs.
  EXPECT_EQ(hs.bos, -1);
  EXPECT_EQ(gs.bos, 0);
  EXPECT_EQ(g.chat_template(), h.chat_template());
}

// Proves the public benchmark prompts encode to the tokenizer.json's ids, and
// the 2K ones to the ids Hugging Face `tokenizers` gave (greedy_2k.json).
TEST(EmbeddedGguf, PublicPromptsGiveTheHfIds) {
  if (!test::have_model_and_prompts()) GTEST_SKIP() << "public prompts absent";
  std::ifstream in(test::public_prompts_path());
  ASSERT_TRUE(in) << test::public_prompts_path();
  std::map<std::string, std::vector<int32_t>> by_id;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json j = json::parse(line);
    const std::string text = j.at("text").get<std::string>();
    const std::vector<int32_t> ids = gguf_tokenizer().encode(text, true, true);
    EXPECT_EQ(ids, hf_tokenizer().encode(text, true, true)) << j.at("id");
    EXPECT_EQ(gguf_tokenizer().decode(ids.data(), ids.size(), false), nfc(text)) << j.at("id");
    by_id[j.at("id").get<std::string>()] = ids;
  }
  EXPECT_EQ(by_id.size(), 24u);
  std::ifstream golden(std::string(VEGAS_SOURCE_DIR) + "/tests/fixtures/embedded/greedy_2k.json");
  ASSERT_TRUE(golden);
  const json prompts = json::parse(golden);
  ASSERT_FALSE(prompts.empty());
  for (const json &p : prompts) {
    const std::string id = p.at("id").get<std::string>();
    ASSERT_EQ(by_id.count(id), 1u) << id;
    EXPECT_EQ(by_id[id], p.at("prompt_ids").get<std::vector<int32_t>>()) << id;
  }
}

// Proves tricky strings (non-NFC text, digits, whitespace runs, special
// tokens' text, invalid UTF-8...) encode to the tokenizer.json's ids, with and
// without special-token parsing.
TEST(EmbeddedGguf, TrickyStringsGiveTheHfIds) {
  for (const std::string &s : tricky_strings())
    for (bool parse_special : {true, false}) {
      EXPECT_EQ(gguf_tokenizer().encode(s, parse_special, true),
                hf_tokenizer().encode(s, parse_special, true))
          << "parse_special " << parse_special << ": " << s;
    }
  // The NFC normalizer is applied: decomposed and composed forms are one.
  EXPECT_EQ(gguf_tokenizer().encode("caf\x65\xCC\x81", true, true),
            gguf_tokenizer().encode("caf\xC3\xA9", true, true));
  // Special tokens' text is one id when parsed, several when not.
  EXPECT_EQ(gguf_tokenizer().encode("<|im_start|>", true, true), (std::vector<int32_t>{1}));
  EXPECT_GT(gguf_tokenizer().encode("<|im_start|>", false, true).size(), 1u);
}

// Proves decoding gives back the (NFC, lossy-UTF-8) text, with and without
// skipping special tokens, as the tokenizer.json's decoding does.
TEST(EmbeddedGguf, DecodeRoundTrips) {
  for (const std::string &s : tricky_strings()) {
    const std::vector<int32_t> ids = gguf_tokenizer().encode(s, true, false);
    EXPECT_EQ(gguf_tokenizer().decode(ids.data(), ids.size(), false), nfc(s)) << s;
    for (bool skip : {true, false})
      EXPECT_EQ(gguf_tokenizer().decode(ids.data(), ids.size(), skip),
                hf_tokenizer().decode(ids.data(), ids.size(), skip))
          << s;
  }
}

// ---------------------------------------------------------------------------
// Small GGUFs built in memory.

// The 256 byte symbols of GPT-2's alphabet, ids 0..255 (id == byte value).
std::vector<std::string> byte_symbols() {
  std::vector<std::string> out;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    byte_level::encode(std::string(1, static_cast<char>(b)), s);
    out.push_back(s);
  }
  return out;
}

constexpr int32_t kId12 = 256, kId34 = 257, kId123 = 258, kId45 = 259, kIdSpaceDot = 260;
constexpr int32_t kIdControl = 261, kIdPad = 262, kIdUser = 263, kIdEos = 264;

// A valid gpt2 tokenizer: the byte symbols, a few merges, and one token of
// each added kind: <|s|> CONTROL, [PAD262] UNUSED filler, <tool> USER_DEFINED,
// <|eos|> CONTROL (eos and pad).
const std::vector<std::pair<std::string, int32_t>> &extra_tokens() {
  static const std::vector<std::pair<std::string, int32_t>> extra = {
      {"12", 1},    {"34", 1},       {"123", 1},    {"45", 1},      {"\xC4\xA0.", 1},
      {"<|s|>", 3}, {"[PAD262]", 5}, {"<tool>", 4}, {"<|eos|>", 3},
  };
  return extra;
}

std::vector<std::string> tiny_tokens() {
  std::vector<std::string> tokens = byte_symbols();
  for (const auto &e : extra_tokens()) tokens.push_back(e.first);
  return tokens;
}

GgufBuilder tiny(const std::string &pre = "qwen2") {
  const std::vector<std::string> tokens = tiny_tokens();
  std::vector<int32_t> types(256, 1);
  for (const auto &e : extra_tokens()) types.push_back(e.second);
  GgufBuilder b;
  b.set_string("general.architecture", "qwen2")
      .set_string("tokenizer.ggml.model", "gpt2")
      .set_string("tokenizer.ggml.pre", pre)
      .set_string_array("tokenizer.ggml.tokens", tokens)
      .set_i32_array("tokenizer.ggml.token_type", types)
      .set_string_array("tokenizer.ggml.merges", {"1 2", "3 4", "12 3", "4 5", "\xC4\xA0 ."})
      .set_u32("tokenizer.ggml.eos_token_id", kIdEos)
      .set_u32("tokenizer.ggml.padding_token_id", kIdEos);
  return b;
}

std::unique_ptr<Tokenizer> load(const GgufBuilder &b) {
  const std::vector<uint8_t> bytes = b.build();
  const std::unique_ptr<File> file = File::parse(bytes.data(), bytes.size(), "tiny.gguf");
  return tokenizer_from_gguf(*file);
}

// The token bytes of each id of `text`'s encoding: shows where it was split.
std::vector<std::string> pieces(const Tokenizer &tok, const std::string &text) {
  std::vector<std::string> out;
  for (int32_t id : tok.encode(text, true, false)) out.push_back(tok.token_bytes(id));
  return out;
}

using Pieces = std::vector<std::string>;

// Expects tokenizer_from_gguf to throw `status` with `needles` in its message.
void expect_error(const GgufBuilder &b, vegas_status status,
                  const std::vector<std::string> &needles) {
  try {
    load(b);
    FAIL() << "no error; expected " << needles.front();
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), status) << e.what();
    for (const std::string &n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

// Proves the token types' meaning: CONTROL is special (matched only when
// parsing specials), USER_DEFINED is matched always and not special, the
// [PAD] filler is never produced, found, or decoded to text; eos/pad ids read.
TEST(TinyGguf, TokenTypesBecomeAddedTokensOrNothing) {
  const auto tok = load(tiny());
  EXPECT_EQ(tok->vocab_size(), 265);
  EXPECT_EQ(tok->encode("12<|s|>3", true, false),
            (std::vector<int32_t>{'1', '2', kIdControl, '3'}));
  EXPECT_EQ(tok->encode("<|s|>", false, false), (std::vector<int32_t>{'<', '|', 's', '|', '>'}));
  EXPECT_TRUE(tok->is_special(kIdControl));
  EXPECT_EQ(tok->encode("a<tool>b", false, false), (std::vector<int32_t>{'a', kIdUser, 'b'}));
  EXPECT_FALSE(tok->is_special(kIdUser));
  EXPECT_EQ(tok->find_token("[PAD262]"), -1);
  const std::vector<int32_t> pad_text = tok->encode("[PAD262]", true, false);
  EXPECT_EQ(std::count(pad_text.begin(), pad_text.end(), kIdPad), 0);
  EXPECT_EQ(tok->decode(&kIdPad, 1, false), "");
  EXPECT_FALSE(tok->is_special(kIdPad));
  EXPECT_EQ(tok->special_ids().eos, kIdEos);
  EXPECT_EQ(tok->special_ids().pad, kIdEos);
  EXPECT_EQ(tok->special_ids().bos, -1);
  EXPECT_EQ(tok->chat_template(), "");
  // Not added by default (qwen2).
  EXPECT_EQ(tok->encode("1", true, true), (std::vector<int32_t>{'1'}));
}

// Proves each supported pre type splits as its Hugging Face pre-tokenizer (or,
// for default, llama.cpp's fallback): digits one by one (qwen2, starcoder),
// in threes (llama-bpe, default), as one run (gpt-2); " ." kept whole except
// by default, which splits punctuation off first.
TEST(TinyGguf, PreTypesSplitAsTheirTokenizers) {
  struct Case {
    std::string pre;
    Pieces digits, space_dot;
  };
  const std::vector<Case> cases = {
      {"qwen2", {"1", "2", "3", "4", "5"}, {" ."}},
      {"llama-bpe", {"123", "45"}, {" ."}},
      {"llama3", {"123", "45"}, {" ."}},
      {"llama-v3", {"123", "45"}, {" ."}},
      {"gpt-2", {"12", "34", "5"}, {" ."}},
      {"starcoder", {"1", "2", "3", "4", "5"}, {" ."}},
      {"smollm", {"1", "2", "3", "4", "5"}, {" ."}},
      {"default", {"123", "45"}, {" ", "."}},
  };
  for (const Case &c : cases) {
    const auto tok = load(tiny(c.pre));
    EXPECT_EQ(pieces(*tok, "12345"), c.digits) << c.pre;
    EXPECT_EQ(pieces(*tok, " ."), c.space_dot) << c.pre;
  }
  // No pre key: llama.cpp's "default".
  const auto tok = load(tiny().remove("tokenizer.ggml.pre"));
  EXPECT_EQ(pieces(*tok, "12345"), (Pieces{"123", "45"}));
  EXPECT_EQ(pieces(*tok, " ."), (Pieces{" ", "."}));
}

// Proves qwen2 applies NFC (as Qwen2's tokenizer.json does) and the other pre
// types do not.
TEST(TinyGguf, OnlyQwen2Normalizes) {
  const std::string decomposed = "a\xCC\x81", composed = "\xC3\xA1";
  auto round_trip = [&](const std::string &pre) {
    const auto tok = load(tiny(pre));
    const std::vector<int32_t> ids = tok->encode(decomposed, true, false);
    return tok->decode(ids.data(), ids.size(), false);
  };
  EXPECT_EQ(round_trip("qwen2"), composed);
  for (const char *pre : {"llama-bpe", "gpt-2", "starcoder", "default"})
    EXPECT_EQ(round_trip(pre), decomposed) << pre;
}

// Proves add_bos_token/add_eos_token decide what encode adds, and without
// add_bos_token the pre type's llama.cpp default does (Llama 3 adds BOS).
TEST(TinyGguf, AddBosAndEosFollowMetadataThenPreDefault) {
  auto with_bos = [](const std::string &pre) {
    GgufBuilder b = tiny(pre);
    b.set_u32("tokenizer.ggml.bos_token_id", kIdControl);
    return b;
  };
  const std::vector<int32_t> plain{'1'}, bos{kIdControl, '1'};
  EXPECT_EQ(load(with_bos("qwen2"))->encode("1", true, true), plain);
  EXPECT_EQ(load(with_bos("llama-bpe"))->encode("1", true, true), bos);
  EXPECT_EQ(load(with_bos("llama-bpe"))->encode("1", true, false), plain);
  EXPECT_EQ(load(with_bos("qwen2").set_bool("tokenizer.ggml.add_bos_token", true))
                ->encode("1", true, true),
            bos);
  EXPECT_EQ(load(with_bos("llama-bpe").set_bool("tokenizer.ggml.add_bos_token", false))
                ->encode("1", true, true),
            plain);
  EXPECT_EQ(load(with_bos("qwen2").set_bool("tokenizer.ggml.add_eos_token", true))
                ->encode("1", true, true),
            (std::vector<int32_t>{'1', kIdEos}));
  EXPECT_EQ(load(with_bos("qwen2"))->special_ids().bos, kIdControl);
}

// Proves tokenizer.chat_template reaches Tokenizer::chat_template.
TEST(TinyGguf, ChatTemplateIsTheConfigs) {
  const std::string tmpl =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";
  EXPECT_EQ(load(tiny().set_string("tokenizer.chat_template", tmpl))->chat_template(), tmpl);
}

// Proves an added token that a merge uses is in the vocabulary too (as it
// must have been in the tokenizer.json), so BPE can produce it.
TEST(TinyGguf, AddedTokenUsedByAMergeIsInTheVocabulary) {
  GgufBuilder b = tiny();
  b.set_string_array("tokenizer.ggml.merges", {"1 2", "3 4", "12 3", "4 5", "\xC4\xA0 .", "a b"});
  std::vector<std::string> tokens = tiny_tokens();
  tokens[kIdEos] = "ab";  // CONTROL, and the merge's result
  b.set_string_array("tokenizer.ggml.tokens", tokens);
  const auto tok = load(b);
  EXPECT_EQ(tok->encode("ab", false, false), (std::vector<int32_t>{kIdEos}));
  EXPECT_EQ(tok->encode("xab", true, false), (std::vector<int32_t>{'x', kIdEos}));
  EXPECT_TRUE(tok->is_special(kIdEos));
}

// Proves malformed tokenizer metadata is a FORMAT error naming the key.
TEST(TinyGguf, BadMetadataIsFormat) {
  const std::string tokens = "tokenizer.ggml.tokens", types = "tokenizer.ggml.token_type",
                    merges = "tokenizer.ggml.merges";
  expect_error(tiny().set_string(tokens, "abc"), VEGAS_ERR_FORMAT, {tokens, "not an array"});
  expect_error(tiny().set_i32_array(tokens, {1, 2, 3}), VEGAS_ERR_FORMAT,
               {tokens + "[0]", "not a string"});
  expect_error(tiny().remove(tokens), VEGAS_ERR_FORMAT, {tokens, "missing"});
  expect_error(tiny().set_string_array(tokens, {}), VEGAS_ERR_FORMAT, {tokens, "empty"});
  {
    std::vector<std::string> bad = tiny_tokens();
    bad[7] = "\xFF";
    expect_error(tiny().set_string_array(tokens, bad), VEGAS_ERR_FORMAT, {tokens + "[7]", "UTF-8"});
    bad[7] = bad[8];
    expect_error(tiny().set_string_array(tokens, bad), VEGAS_ERR_FORMAT,
                 {tokens + "[8]", "repeats token 7"});
  }
  expect_error(tiny().set_i32_array(types, {1, 1, 1}), VEGAS_ERR_FORMAT,
               {types, "3 entries for 265 tokens"});
  {
    std::vector<int32_t> bad(265, 1);
    bad[9] = 9;
    expect_error(tiny().set_i32_array(types, bad), VEGAS_ERR_FORMAT, {types + "[9]", "9"});
  }
  expect_error(tiny().set_string(types, "x"), VEGAS_ERR_FORMAT, {types, "not an array"});
  expect_error(tiny().remove(merges), VEGAS_ERR_FORMAT, {merges, "missing"});
  expect_error(tiny().set_i32_array(merges, {1}), VEGAS_ERR_FORMAT, {merges + "[0]", "string"});
  for (const char *bad : {"12", "1  2", " 1 2", "1 2 ", "1 2 3"})
    expect_error(tiny().set_string_array(merges, {"3 4", bad}), VEGAS_ERR_FORMAT,
                 {merges + "[1]", "not two tokens"});
  expect_error(tiny().set_string_array(merges, {"x yz"}), VEGAS_ERR_FORMAT,
               {"merges[0]", "not in the vocabulary"});
  expect_error(tiny().set_u32("tokenizer.ggml.bos_token_id", 265), VEGAS_ERR_FORMAT,
               {"tokenizer.ggml.bos_token_id", "265 is not a token id"});
  expect_error(tiny().set_i32("tokenizer.ggml.eos_token_id", -1), VEGAS_ERR_FORMAT,
               {"tokenizer.ggml.eos_token_id", "-1"});
  expect_error(tiny().set_string("tokenizer.ggml.eos_token_id", "0"), VEGAS_ERR_FORMAT,
               {"tokenizer.ggml.eos_token_id", "not an integer"});
  expect_error(tiny()
                   .set_u32("tokenizer.ggml.bos_token_id", kIdPad)
                   .set_bool("tokenizer.ggml.add_bos_token", true),
               VEGAS_ERR_FORMAT, {"tokenizer.ggml.bos_token_id", "unused"});
  expect_error(tiny()
                   .set_u32("tokenizer.ggml.eos_token_id", kIdPad)
                   .set_bool("tokenizer.ggml.add_eos_token", true),
               VEGAS_ERR_FORMAT, {"tokenizer.ggml.eos_token_id", "unused"});
  expect_error(tiny().set_u32("tokenizer.ggml.add_bos_token", 1), VEGAS_ERR_FORMAT,
               {"tokenizer.ggml.add_bos_token", "not a bool"});
  expect_error(tiny().set_u32("tokenizer.chat_template", 1), VEGAS_ERR_FORMAT,
               {"tokenizer.chat_template", "not a string"});
  expect_error(tiny().set_u32("tokenizer.ggml.model", 2), VEGAS_ERR_FORMAT,
               {"tokenizer.ggml.model", "not a string"});
  // The padding id may name the filler (it is then no token), and so may
  // bos/eos where the file does not add them (llama.cpp's converter, padding
  // a random model's vocabulary, points bos there): absent, and not added.
  EXPECT_EQ(load(tiny().set_u32("tokenizer.ggml.padding_token_id", kIdPad))->special_ids().pad, -1);
  const auto padded_bos = load(tiny()
                                   .set_string("tokenizer.ggml.pre", "llama-bpe")
                                   .set_u32("tokenizer.ggml.bos_token_id", kIdPad)
                                   .remove("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(padded_bos->special_ids().bos, -1);
  EXPECT_EQ(padded_bos->encode("1", true, true), (std::vector<int32_t>{'1'}));
}

// Proves a tokenizer model or pre type this runtime does not read, or no
// tokenizer at all, is UNSUPPORTED naming it (the model then loads without one).
TEST(TinyGguf, UnknownTokenizerIsUnsupported) {
  for (const char *model : {"llama", "bert", "t5", "rwkv", "none"})
    expect_error(tiny().set_string("tokenizer.ggml.model", model), VEGAS_ERR_UNSUPPORTED,
                 {"tokenizer.ggml.model", std::string("\"") + model + "\""});
  for (const char *pre : {"falcon", "deepseek-llm", "qwen35", "tekken", ""})
    expect_error(tiny(pre), VEGAS_ERR_UNSUPPORTED,
                 {"tokenizer.ggml.pre", std::string("\"") + pre + "\""});
  expect_error(tiny().remove("tokenizer.ggml.model"), VEGAS_ERR_UNSUPPORTED,
               {"no tokenizer", "tokenizer.ggml.model"});
}

}  // namespace
}  // namespace vegas::gguf
