#include "tokenizer/bpe_tokenizer.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace vegas {

namespace {

bool json_bool(const nlohmann::json &obj, const char *key, bool fallback) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return fallback;
  if (!obj[key].is_boolean())
    fail(VEGAS_ERR_FORMAT, std::string("\"") + key + "\" is not a boolean");
  return obj[key].get<bool>();
}

std::vector<AddedToken> parse_added_tokens(const nlohmann::json &tokenizer) {
  std::vector<AddedToken> tokens;
  if (!tokenizer.contains("added_tokens") || tokenizer["added_tokens"].is_null()) return tokens;
  const auto &list = tokenizer["added_tokens"];
  if (!list.is_array()) fail(VEGAS_ERR_FORMAT, "tokenizer.json: added_tokens is not an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const auto &e = list[i];
    const std::string where = "tokenizer.json: added_tokens[" + std::to_string(i) + "]";
    if (!e.is_object() || !e.contains("id") || !e["id"].is_number_integer() ||
        e["id"].get<int64_t>() < 0 || e["id"].get<int64_t>() >= INT32_MAX)
      fail(VEGAS_ERR_FORMAT, where + " has no valid \"id\"");
    if (!e.contains("content") || !e["content"].is_string())
      fail(VEGAS_ERR_FORMAT, where + " has no \"content\"");
    AddedToken t;
    t.id = e["id"].get<int32_t>();
    t.content = e["content"].get<std::string>();
    if (!utf8::is_valid(t.content)) fail(VEGAS_ERR_FORMAT, where + " content is not UTF-8");
    t.special = json_bool(e, "special", false);
    t.single_word = json_bool(e, "single_word", false);
    t.lstrip = json_bool(e, "lstrip", false);
    t.rstrip = json_bool(e, "rstrip", false);
    t.normalized = json_bool(e, "normalized", !t.special);
    tokens.push_back(std::move(t));
  }
  return tokens;
}

void check_decoder(const nlohmann::json &decoder) {
  if (decoder.is_null())
    fail(VEGAS_ERR_UNSUPPORTED,
         "tokenizer.json: decoder null is not supported (libvegas needs the ByteLevel decoder)");
  if (!decoder.is_object() || !decoder.contains("type") || !decoder["type"].is_string())
    fail(VEGAS_ERR_FORMAT, "tokenizer.json: decoder has no \"type\"");
  const std::string type = decoder["type"].get<std::string>();
  if (type == "Sequence" && decoder.contains("decoders") && decoder["decoders"].is_array() &&
      decoder["decoders"].size() == 1) {
    check_decoder(decoder["decoders"][0]);
    return;
  }
  if (type != "ByteLevel")
    fail(VEGAS_ERR_UNSUPPORTED, "tokenizer.json: decoder type \"" + type + "\" is not supported");
}

// A token name in tokenizer_config.json: a string, or an AddedToken object.
std::string config_token_name(const nlohmann::json &v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return {};
}

// tokenizer_config.json's chat_template: a string, or a list of {name,
// template} objects of which "default" (else the first) is the chat one.
std::string config_chat_template(const nlohmann::json &config) {
  if (!config.is_object() || !config.contains("chat_template")) return {};
  const nlohmann::json &t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (!t.is_array()) return {};
  std::string first;
  for (const nlohmann::json &e : t) {
    if (!e.is_object() || !e.contains("template") || !e["template"].is_string()) continue;
    const bool is_default = e.contains("name") && e["name"] == "default";
    if (is_default) return e["template"].get<std::string>();
    if (first.empty()) first = e["template"].get<std::string>();
  }
  return first;
}

}  // namespace

BpeTokenizer::BpeTokenizer(const nlohmann::json &tokenizer, const nlohmann::json &config)
    : normalizer_(tokenizer.is_object() && tokenizer.contains("normalizer")
                      ? tokenizer["normalizer"]
                      : nlohmann::json()),
      pre_tokenizer_(tokenizer.contains("pre_tokenizer") ? tokenizer["pre_tokenizer"]
                                                         : nlohmann::json()),
      model_(tokenizer.contains("model") ? tokenizer["model"] : nlohmann::json()),
      post_processor_(tokenizer.contains("post_processor") ? tokenizer["post_processor"]
                                                           : nlohmann::json()) {
  check_decoder(tokenizer.contains("decoder") ? tokenizer["decoder"] : nlohmann::json());

  std::vector<AddedToken> added = parse_added_tokens(tokenizer);
  vocab_size_ = model_.id_space();
  // As for the model's ids: tables are dense, so an added token may not sit far
  // past every other id (it would cost memory in proportion to its id).
  const int64_t id_limit =
      2 * (static_cast<int64_t>(vocab_size_) + static_cast<int64_t>(added.size())) + 1024;
  for (const AddedToken &t : added) {
    if (t.id >= id_limit)
      fail(VEGAS_ERR_FORMAT, "tokenizer.json: added token \"" + t.content + "\" has id " +
                                 std::to_string(t.id) + ", far past the vocabulary");
    vocab_size_ = std::max(vocab_size_, t.id + 1);
    added_ids_.emplace(t.content, t.id);
  }
  token_bytes_.resize(static_cast<size_t>(vocab_size_));
  special_.assign(static_cast<size_t>(vocab_size_), false);
  // The ByteLevel decoder maps a token's characters back to bytes, or keeps
  // the token's own UTF-8 when a character is outside the byte alphabet.
  auto to_bytes = [](const std::string &token) {
    std::string bytes;
    return byte_level::decode(token, bytes) ? bytes : token;
  };
  for (int32_t id = 0; id < model_.id_space(); ++id)
    token_bytes_[static_cast<size_t>(id)] = to_bytes(model_.token(id));
  for (const AddedToken &t : added) {
    token_bytes_[static_cast<size_t>(t.id)] = to_bytes(t.content);
    if (t.special) special_[static_cast<size_t>(t.id)] = true;
  }
  added_.build(std::move(added), [this](const std::string &s) { return normalizer_.apply(s); });
  read_special_ids(config);
}

void BpeTokenizer::read_special_ids(const nlohmann::json &config) {
  auto by_name = [this](std::initializer_list<const char *> names) {
    for (const char *n : names) {
      const int32_t id = find_token(n);
      if (id >= 0) return id;
    }
    return int32_t{-1};
  };
  // The config's bos/eos/pad win when present (even as null); else well-known names.
  auto from_config = [&](const char *key, std::initializer_list<const char *> fallback) {
    if (config.is_object() && config.contains(key)) {
      const std::string name = config_token_name(config[key]);
      if (name.empty()) return int32_t{-1};
      const int32_t id = find_token(name);
      if (id < 0)
        fail(VEGAS_ERR_FORMAT, std::string("tokenizer_config.json: ") + key + " \"" + name +
                                   "\" is not a token of tokenizer.json");
      return id;
    }
    return by_name(fallback);
  };
  special_ids_.bos = from_config("bos_token", {"<|begin_of_text|>"});
  special_ids_.eos = from_config("eos_token", {"<|endoftext|>", "<|end_of_text|>"});
  special_ids_.pad = from_config("pad_token", {});
  special_ids_.fim_prefix = by_name({"<|fim_prefix|>"});
  special_ids_.fim_middle = by_name({"<|fim_middle|>"});
  special_ids_.fim_suffix = by_name({"<|fim_suffix|>"});
  special_ids_.fim_pad = by_name({"<|fim_pad|>"});
  special_ids_.file_sep = by_name({"<|file_sep|>"});
  special_ids_.im_start = by_name({"<|im_start|>"});
  special_ids_.im_end = by_name({"<|im_end|>"});
  add_bos_ = json_bool(config, "add_bos_token", false);
  chat_template_ = config_chat_template(config);
  add_eos_ = json_bool(config, "add_eos_token", false);
}

void BpeTokenizer::encode_plain(std::string_view text, std::vector<std::string> &words,
                                std::vector<int32_t> &ids) const {
  words.clear();
  pre_tokenizer_.split(text, words);
  for (const std::string &w : words) model_.tokenize(w, ids);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool parse_special,
                                          bool add_special) const {
  const std::string clean = utf8::lossy(text);
  std::vector<int32_t> ids;
  ids.reserve(clean.size() / 3 + 4);
  std::vector<std::string> words;
  std::vector<TextSegment> raw, normalized;
  // 1. Added tokens matched on the raw text; 2. the rest normalized, then
  // searched for tokens with normalized=true; 3. pre-tokenize and BPE.
  added_.split(clean, false, !parse_special, raw);
  for (const TextSegment &seg : raw) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    const std::string_view piece = std::string_view(clean).substr(seg.start, seg.end - seg.start);
    const std::string norm =
        normalizer_.is_identity() ? std::string(piece) : normalizer_.apply(piece);
    if (!added_.has_normalized_tokens()) {
      encode_plain(norm, words, ids);
      continue;
    }
    normalized.clear();
    added_.split(norm, true, !parse_special, normalized);
    for (const TextSegment &s : normalized) {
      if (s.id >= 0)
        ids.push_back(s.id);
      else
        encode_plain(std::string_view(norm).substr(s.start, s.end - s.start), words, ids);
    }
  }
  if (!add_special) return ids;
  if (post_processor_.has_template()) return post_processor_.apply(ids);
  if (add_bos_ && special_ids_.bos >= 0) ids.insert(ids.begin(), special_ids_.bos);
  if (add_eos_ && special_ids_.eos >= 0) ids.push_back(special_ids_.eos);
  return ids;
}

const std::string &BpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size_)
    fail(VEGAS_ERR_TOKEN_OUT_OF_RANGE,
         "token id " + std::to_string(id) + " is outside [0, " + std::to_string(vocab_size_) + ")");
  return token_bytes_[static_cast<size_t>(id)];
}

std::string BpeTokenizer::decode(const int32_t *ids, size_t n, bool skip_special) const {
  std::string bytes;
  for (size_t i = 0; i < n; ++i) {
    const std::string &piece = token_bytes(ids[i]);
    if (!(skip_special && special_[static_cast<size_t>(ids[i])])) bytes += piece;
  }
  return utf8::lossy(bytes);
}

int32_t BpeTokenizer::find_token(std::string_view text) const {
  const auto it = added_ids_.find(std::string(text));
  if (it != added_ids_.end()) return it->second;
  return model_.find(text);
}

bool BpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size_ && special_[static_cast<size_t>(id)];
}

}  // namespace vegas
