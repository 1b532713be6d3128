#include "gguf/gguf_tokenizer.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/utf8.h"

namespace vegas::gguf {

namespace {

using json = nlohmann::json;

constexpr const char *kModel = "tokenizer.ggml.model";
constexpr const char *kPre = "tokenizer.ggml.pre";
constexpr const char *kTokens = "tokenizer.ggml.tokens";
constexpr const char *kTokenType = "tokenizer.ggml.token_type";
constexpr const char *kMerges = "tokenizer.ggml.merges";
constexpr const char *kBosId = "tokenizer.ggml.bos_token_id";
constexpr const char *kEosId = "tokenizer.ggml.eos_token_id";
constexpr const char *kPadId = "tokenizer.ggml.padding_token_id";
constexpr const char *kAddBos = "tokenizer.ggml.add_bos_token";
constexpr const char *kAddEos = "tokenizer.ggml.add_eos_token";
constexpr const char *kChatTemplate = "tokenizer.chat_template";

// The split patterns of the Hugging Face tokenizer.json files the pre types
// stand for (Oniguruma syntax, as SplitRegex takes them).
constexpr const char *kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char *kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

[[noreturn]] void bad(const File &file, const std::string &key, const std::string &what) {
  fail(VEGAS_ERR_FORMAT, file.source() + ": metadata " + key + " " + what);
}

json split_isolated(const char *pattern) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", pattern}}},
          {"behavior", "Isolated"},
          {"invert", false}};
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

json sequence(std::vector<json> steps) {
  return {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}};
}

// What one tokenizer.ggml.pre value means in tokenizer.json terms.
struct PreType {
  json normalizer;  // null: none
  json pre_tokenizer;
  bool ignore_merges = false;
  bool add_bos = false;  // llama.cpp's default when add_bos_token is absent
};

PreType pre_type(const std::string &source, const std::string &pre) {
  PreType t;
  if (pre == "qwen2") {
    // Qwen2's tokenizer.json: NFC, its split regex, ByteLevel without regex.
    t.normalizer = {{"type", "NFC"}};
    t.pre_tokenizer = sequence({split_isolated(kQwen2Pattern), byte_level(false)});
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    // Llama 3's tokenizer.json: its split regex, ignore_merges, BOS added.
    t.pre_tokenizer = sequence({split_isolated(kLlama3Pattern), byte_level(false)});
    t.ignore_merges = true;
    t.add_bos = true;
  } else if (pre == "gpt-2") {
    // GPT-2's tokenizer.json: ByteLevel with its built-in regex.
    t.pre_tokenizer = byte_level(true);
  } else if (pre == "starcoder" || pre == "smollm") {
    // StarCoder's (and SmolLM's) tokenizer.json: Digits(individual_digits),
    // whose char::is_numeric is \p{N}, then ByteLevel with the GPT-2 regex.
    t.pre_tokenizer = sequence({split_isolated(R"(\p{N})"), byte_level(true)});
  } else if (pre == "default") {
    // No Hugging Face pre-tokenizer: llama.cpp's fallback, four regexes
    // applied in turn, each splitting the pieces of the one before.
    t.pre_tokenizer = sequence({
        split_isolated(R"([\p{P}\$\+<=>\^~\|]+)"),
        split_isolated(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))"),
        split_isolated(R"(\p{N}+)"),
        split_isolated(R"([0-9][0-9][0-9])"),
        byte_level(false),
    });
  } else {
    fail(VEGAS_ERR_UNSUPPORTED, source + ": metadata " + kPre + " \"" + pre +
                                    "\" is not a supported pre-tokenizer (qwen2, llama-bpe, "
                                    "gpt-2, starcoder, smollm, default are)");
  }
  return t;
}

// A merge "a b": exactly one space, with a token on each side.
std::pair<std::string_view, std::string_view> split_merge(const File &file, const json &entry,
                                                          size_t index) {
  const std::string where = std::string(kMerges) + "[" + std::to_string(index) + "]";
  if (!entry.is_string()) bad(file, where, "is not a string");
  const std::string &s = entry.get_ref<const std::string &>();
  const size_t space = s.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 == s.size() ||
      s.find(' ', space + 1) != std::string::npos)
    bad(file, where, "\"" + s + "\" is not two tokens \"a b\"");
  if (!utf8::is_valid(s)) bad(file, where, "is not UTF-8");
  const std::string_view v = s;
  return {v.substr(0, space), v.substr(space + 1)};
}

// A token id key, checked against the token count; -1 when absent.
int64_t token_id(const File &file, const char *key, size_t n_tokens) {
  if (!file.has(key)) return -1;
  const int64_t id = file.get_int(key);
  if (id < 0 || static_cast<uint64_t>(id) >= n_tokens)
    bad(file, key,
        std::to_string(id) + " is not a token id (there are " + std::to_string(n_tokens) + ")");
  return id;
}

}  // namespace

namespace {

// A pre-tokenizer without ByteLevel's trim_offsets, which moves offsets, not tokens.
json without_trim_offsets(json j) {
  if (j.is_object()) {
    j.erase("trim_offsets");
    for (auto &[key, value] : j.items()) value = without_trim_offsets(value);
  } else if (j.is_array()) {
    for (json &value : j) value = without_trim_offsets(value);
  }
  return j;
}

}  // namespace

std::string gguf_pre_type(const nlohmann::json &tokenizer_json) {
  const json pre = without_trim_offsets(tokenizer_json.value("pre_tokenizer", json()));
  const json norm = tokenizer_json.value("normalizer", json());
  for (const char *name : {"qwen2", "llama-bpe", "gpt-2"}) {
    const PreType t = pre_type("", name);
    if (without_trim_offsets(t.pre_tokenizer) == pre && t.normalizer == norm) return name;
  }
  return {};
}

namespace {

// tokenizer.ggml.model: byte-level BPE ("gpt2") is the one supported.
void check_model(const File &file) {
  if (!file.has(kModel))
    fail(VEGAS_ERR_UNSUPPORTED,
         file.source() + ": no tokenizer (metadata " + kModel + " is absent)");
  const std::string model = file.get_string(kModel);
  if (model != "gpt2")
    fail(VEGAS_ERR_UNSUPPORTED, file.source() + ": metadata " + kModel + " \"" + model +
                                    "\" is not a supported tokenizer (only \"gpt2\", byte-level "
                                    "BPE, is)");
}

// tokenizer.ggml.tokens, each checked to be a UTF-8 string.
const json &read_tokens(const File &file) {
  const json &tokens = file.get_array(kTokens);
  const size_t n = tokens.size();
  if (n == 0) bad(file, kTokens, "is empty");
  if (n >= static_cast<size_t>(INT32_MAX)) bad(file, kTokens, "has too many tokens");
  for (size_t i = 0; i < n; ++i) {
    if (!tokens[i].is_string())
      bad(file, kTokens + ("[" + std::to_string(i) + "]"), "is not a string");
    if (!utf8::is_valid(tokens[i].get_ref<const std::string &>()))
      bad(file, kTokens + ("[" + std::to_string(i) + "]"), "is not UTF-8");
  }
  return tokens;
}

// tokenizer.ggml.token_type for n tokens, or every one normal when absent.
std::vector<int64_t> read_token_types(const File &file, size_t n) {
  std::vector<int64_t> types(n, kNormal);
  if (!file.has(kTokenType)) return types;
  const json &tt = file.get_array(kTokenType);
  if (tt.size() != n)
    bad(file, kTokenType,
        "has " + std::to_string(tt.size()) + " entries for " + std::to_string(n) + " tokens");
  for (size_t i = 0; i < n; ++i) {
    if (!tt[i].is_number_integer() || tt[i].get<int64_t>() < kUndefined ||
        tt[i].get<int64_t>() > kByte)
      bad(file, kTokenType + ("[" + std::to_string(i) + "]"),
          "is " + tt[i].dump() + ", not a token type (0 to 6)");
    types[i] = tt[i].get<int64_t>();
  }
  return types;
}

// The token ids sorted as tokenizer.json keeps them: vocabulary entries,
// added tokens, and the converter's fillers for ids that hold nothing.
struct SortedIds {
  json vocab = json::object();  // text -> id
  json added = json::array();   // tokenizer.json's added_tokens
  std::vector<size_t> added_ids;
  std::vector<bool> unused;
};

SortedIds sort_ids(const File &file, const json &tokens, const std::vector<int64_t> &types) {
  SortedIds ids;
  json::object_t &vocab_map = ids.vocab.get_ref<json::object_t &>();
  ids.unused.assign(tokens.size(), false);
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string &text = tokens[id].get_ref<const std::string &>();
    const int64_t type = types[id];
    if (type == kUnused && text == "[PAD" + std::to_string(id) + "]") {
      ids.unused[id] = true;  // the converter's filler for an id the vocabulary lacks
      continue;
    }
    if (type == kControl || type == kUnknown || type == kUserDefined) {
      // As HF's added tokens; the converter stored their text pre-normalized.
      const bool special = type != kUserDefined;
      ids.added.push_back({{"id", id},
                           {"content", text},
                           {"single_word", false},
                           {"lstrip", false},
                           {"rstrip", false},
                           {"normalized", false},
                           {"special", special}});
      ids.added_ids.push_back(id);
      continue;
    }
    const auto [it, fresh] = vocab_map.emplace(text, id);
    if (!fresh)
      bad(file, kTokens + ("[" + std::to_string(id) + "]"),
          "\"" + text + "\" repeats token " + it->second.dump());
  }
  return ids;
}

// tokenizer.ggml.merges, each checked to be "a b". An added token that a
// merge uses was in the Hugging Face vocabulary too (its loader would refuse
// the merge otherwise): it goes back into ids.vocab.
json read_merges(const File &file, const json &tokens, SortedIds &ids) {
  const json &merge_list = file.get_array(kMerges);
  json merges = json::array();
  merges.get_ref<json::array_t &>().reserve(merge_list.size());
  std::unordered_map<std::string_view, size_t> added_text;
  bool added_first_byte[256] = {};  // a cheap test before the lookup
  for (size_t id : ids.added_ids) {
    const std::string &text = tokens[id].get_ref<const std::string &>();
    if (text.empty()) continue;
    added_text.emplace(text, id);
    added_first_byte[static_cast<unsigned char>(text[0])] = true;
  }
  std::unordered_set<size_t> added_in_vocab;
  auto note_use = [&](std::string_view text) {
    const auto it = added_text.find(text);
    if (it != added_text.end()) added_in_vocab.insert(it->second);
  };
  std::string joined;
  for (size_t i = 0; i < merge_list.size(); ++i) {
    const auto [a, b] = split_merge(file, merge_list[i], i);
    if (added_first_byte[static_cast<unsigned char>(a[0])]) {
      joined.assign(a);
      joined.append(b);
      note_use(a);
      note_use(joined);
    }
    if (added_first_byte[static_cast<unsigned char>(b[0])]) note_use(b);
    merges.push_back(merge_list[i]);  // "a b", checked to be exactly that
  }
  json::object_t &vocab_map = ids.vocab.get_ref<json::object_t &>();
  for (size_t id : ids.added_ids)
    if (added_in_vocab.count(id) != 0)
      vocab_map.emplace(tokens[id].get_ref<const std::string &>(), id);
  return merges;
}

// tokenizer_config.json's special tokens and add_* flags, and the bos and
// eos ids they name (-1: none).
struct Specials {
  json config = json::object();
  int64_t bos = -1, eos = -1;
};

Specials special_tokens(const File &file, const json &tokens, const SortedIds &ids,
                        const PreType &pre) {
  Specials sp;
  const bool add_bos = file.has(kAddBos) ? file.get_bool(kAddBos) : pre.add_bos;
  const bool add_eos = file.has(kAddEos) ? file.get_bool(kAddEos) : false;
  // A special id that names the [PAD] filler (a converter padding the vocab
  // to the model's rows may point bos there) is no token: absent, unless the
  // file's own metadata asks for it to be added to every prompt (a pre type's
  // default to add bos then adds none).
  auto special_token = [&](const char *key, const char *config_key, bool file_adds) {
    const int64_t id = token_id(file, key, tokens.size());
    if (id < 0) return id;
    if (ids.unused[static_cast<size_t>(id)]) {
      if (file_adds)
        bad(file, key, std::to_string(id) + " names an unused token, which the file adds");
      return int64_t{-1};
    }
    sp.config[config_key] = tokens[static_cast<size_t>(id)];
    return id;
  };
  sp.bos = special_token(kBosId, "bos_token", file.has(kAddBos) && add_bos);
  sp.eos = special_token(kEosId, "eos_token", add_eos);
  special_token(kPadId, "pad_token", false);
  sp.config["add_bos_token"] = add_bos && sp.bos >= 0;
  sp.config["add_eos_token"] = add_eos && sp.eos >= 0;
  if (file.has(kChatTemplate)) sp.config["chat_template"] = file.get_string(kChatTemplate);
  return sp;
}

// The tokenizer.json the metadata stands for, assembled by moves (the
// vocabulary and merges are the bulk of it).
json tokenizer_json(SortedIds ids, json merges, const PreType &pre) {
  json bpe = json::object();
  bpe["type"] = "BPE";
  bpe["vocab"] = std::move(ids.vocab);
  bpe["merges"] = std::move(merges);
  bpe["ignore_merges"] = pre.ignore_merges;
  bpe["fuse_unk"] = false;
  bpe["byte_fallback"] = false;
  json tokenizer = json::object();
  tokenizer["version"] = "1.0";
  tokenizer["added_tokens"] = std::move(ids.added);
  tokenizer["normalizer"] = pre.normalizer;
  tokenizer["pre_tokenizer"] = pre.pre_tokenizer;
  tokenizer["post_processor"] = nullptr;
  tokenizer["decoder"] = byte_level(true);
  tokenizer["model"] = std::move(bpe);
  return tokenizer;
}

// The tokenizer of `tokenizer` and `config`, its errors named after the file.
std::unique_ptr<Tokenizer> build(const File &file, const json &tokenizer, const json &config) {
  try {
    return std::make_unique<BpeTokenizer>(tokenizer, config);
  } catch (const Error &e) {
    // Says "tokenizer.json: model.merges[i]..."; the indices are the metadata's.
    throw Error(e.status(),
                file.source() + ": its tokenizer metadata as a tokenizer.json: " + e.what());
  } catch (const json::exception &e) {
    fail(VEGAS_ERR_FORMAT, file.source() + ": tokenizer metadata: " + e.what());
  }
}

// A bos/eos text that also names another token would have been found as that one.
void check_special_ids(const File &file, const Tokenizer &t, const Specials &sp) {
  if (sp.bos >= 0 && t.special_ids().bos != sp.bos)
    bad(file, kBosId,
        std::to_string(sp.bos) + ": its text names token " + std::to_string(t.special_ids().bos) +
            " first");
  if (sp.eos >= 0 && t.special_ids().eos != sp.eos)
    bad(file, kEosId,
        std::to_string(sp.eos) + ": its text names token " + std::to_string(t.special_ids().eos) +
            " first");
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_from_gguf(const File &file) {
  check_model(file);
  // llama.cpp reads an absent pre type as "default" too.
  const PreType pre = pre_type(file.source(), file.has(kPre) ? file.get_string(kPre) : "default");
  const json &tokens = read_tokens(file);
  SortedIds ids = sort_ids(file, tokens, read_token_types(file, tokens.size()));
  json merges = read_merges(file, tokens, ids);
  const Specials specials = special_tokens(file, tokens, ids, pre);
  std::unique_ptr<Tokenizer> out =
      build(file, tokenizer_json(std::move(ids), std::move(merges), pre), specials.config);
  check_special_ids(file, *out, specials);
  return out;
}

}  // namespace vegas::gguf
