#include "tokenizer/bpe_model.h"

#include <nlohmann/json.hpp>
#include <queue>

#include "common/error.h"
#include "tokenizer/utf8.h"

namespace vegas {

namespace {

// Words longer than this are not cached (they are rare and would crowd the cache).
constexpr size_t kMaxCachedWordBytes = 256;

[[noreturn]] void bad_model(const std::string &what) {
  fail(VEGAS_ERR_FORMAT, "tokenizer.json: model." + what);
}

bool optional_bool(const nlohmann::json &m, const char *key) {
  if (!m.contains(key) || m[key].is_null()) return false;
  if (!m[key].is_boolean()) bad_model(std::string(key) + " is not a boolean");
  return m[key].get<bool>();
}

// A merge is "a b" (older files) or ["a", "b"] (tokenizers >= 0.20).
std::pair<std::string, std::string> parse_merge(const nlohmann::json &entry, size_t index) {
  if (entry.is_string()) {
    const std::string &s = entry.get_ref<const std::string &>();
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
      bad_model("merges[" + std::to_string(index) + "] \"" + s + "\" is not two tokens");
    return {s.substr(0, space), s.substr(space + 1)};
  }
  if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string())
    return {entry[0].get<std::string>(), entry[1].get<std::string>()};
  bad_model("merges[" + std::to_string(index) + "] is neither \"a b\" nor [\"a\", \"b\"]");
}

}  // namespace

BpeModel::BpeModel(const nlohmann::json &m) {
  if (!m.is_object()) fail(VEGAS_ERR_FORMAT, "tokenizer.json: \"model\" is missing");
  if (m.contains("type") && !m["type"].is_null()) {
    if (!m["type"].is_string()) bad_model("type is not a string");
    const std::string type = m["type"].get<std::string>();
    if (type != "BPE")
      fail(VEGAS_ERR_UNSUPPORTED, "tokenizer.json: model type \"" + type + "\" is not supported");
  } else if (!m.contains("merges")) {
    fail(VEGAS_ERR_FORMAT, "tokenizer.json: model has no \"type\"");
  }
  if (!m.contains("vocab") || !m["vocab"].is_object()) bad_model("vocab is missing");
  if (!m.contains("merges") || !m["merges"].is_array()) bad_model("merges is missing");
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() > 0.0)
    fail(VEGAS_ERR_UNSUPPORTED, "tokenizer.json: BPE dropout is not supported");
  for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(key) && !m[key].is_null() && !m[key].get<std::string>().empty())
      fail(VEGAS_ERR_UNSUPPORTED, std::string("tokenizer.json: BPE ") + key + " is not supported");
  if (optional_bool(m, "byte_fallback"))
    fail(VEGAS_ERR_UNSUPPORTED, "tokenizer.json: BPE byte_fallback is not supported");
  fuse_unk_ = optional_bool(m, "fuse_unk");
  ignore_merges_ = optional_bool(m, "ignore_merges");

  const auto &vocab = m["vocab"];
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > INT32_MAX - 1)
      bad_model("vocab[\"" + it.key() + "\"] is not a valid id");
    max_id = std::max(max_id, it.value().get<int64_t>());
  }
  // Ids index dense tables: a far-away id would cost memory in proportion to
  // the id, not to the file (found by fuzzing: one id of 2^28 took 7 GB).
  if (max_id >= 2 * static_cast<int64_t>(vocab.size()) + 1024)
    bad_model("vocab ids are sparse: largest id " + std::to_string(max_id) + " for " +
              std::to_string(vocab.size()) + " entries");
  id_to_token_.resize(static_cast<size_t>(max_id + 1));
  std::vector<bool> used(id_to_token_.size(), false);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const auto id = static_cast<size_t>(it.value().get<int64_t>());
    if (used[id]) bad_model("vocab has id " + std::to_string(id) + " twice");
    used[id] = true;
    id_to_token_[id] = it.key();
  }
  vocab_.reserve(id_to_token_.size());
  for (size_t id = 0; id < id_to_token_.size(); ++id)
    if (used[id]) vocab_.emplace(id_to_token_[id], static_cast<int32_t>(id));

  const auto &merges = m["merges"];
  merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto [a, b] = parse_merge(merges[i], i);
    const int32_t ia = find(a), ib = find(b), merged = find(a + b);
    if (ia < 0 || ib < 0 || merged < 0)
      bad_model("merges[" + std::to_string(i) + "] \"" + a + " " + b +
                "\" uses a token that is not in the vocabulary");
    // A repeated pair keeps its last rank, as HF's HashMap collect does.
    merges_[pair_key(ia, ib)] = Merge{static_cast<int32_t>(i), merged};
  }
  if (m.contains("unk_token") && m["unk_token"].is_string())
    unk_id_ = find(m["unk_token"].get<std::string>());
}

int32_t BpeModel::find(std::string_view token) const {
  const auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

void BpeModel::tokenize(const std::string &word, std::vector<int32_t> &out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const int32_t id = find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable && cache_.lookup(word, out)) return;
  const size_t first = out.size();
  merge_word(word, out);
  if (cacheable) cache_.store(word, out.data() + first, out.size() - first);
}

// One symbol of the word being merged: a doubly linked list over a vector.
namespace {
struct Symbol {
  int32_t id;
  int32_t prev, next;
  bool removed;
};
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  // priority_queue pops the largest: invert so the lowest rank, then the
  // leftmost position, comes first.
  bool operator<(const Candidate &o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};
}  // namespace

void BpeModel::merge_word(std::string_view word, std::vector<int32_t> &out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  // Characters missing from the vocabulary become unk (fused when asked) or,
  // with no unk token, vanish, exactly as HF's BPE does.
  int32_t pending_unk = 0;  // count of unk symbols waiting to be added
  auto add = [&symbols](int32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, false});
  };
  auto flush_unk = [&]() {
    if (pending_unk > 0) add(unk_id_);
    pending_unk = 0;
  };
  for (size_t pos = 0; pos < word.size();) {
    const size_t start = pos;
    utf8::next_codepoint(word, pos);
    const int32_t id = find(word.substr(start, pos - start));
    if (id >= 0) {
      flush_unk();
      add(id);
    } else if (unk_id_ >= 0) {
      if (pending_unk > 0 && !fuse_unk_) flush_unk();
      pending_unk = 1;
    }
  }
  flush_unk();
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Candidate> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    const auto it = merges_.find(pair_key(symbols[i].id, symbols[i + 1].id));
    if (it != merges_.end())
      queue.push({it->second.rank, static_cast<int32_t>(i), it->second.new_id});
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol &left = symbols[static_cast<size_t>(top.pos)];
    if (left.removed || left.next < 0) continue;
    const int32_t right_pos = left.next;
    Symbol &right = symbols[static_cast<size_t>(right_pos)];
    // Skip stale entries: the pair at this position must still merge into new_id.
    const auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;
    left.id = top.new_id;
    left.next = right.next;
    right.removed = true;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) {
      const auto p = merges_.find(pair_key(symbols[static_cast<size_t>(left.prev)].id, left.id));
      if (p != merges_.end()) queue.push({p->second.rank, left.prev, p->second.new_id});
    }
    if (left.next >= 0) {
      const auto n = merges_.find(pair_key(left.id, symbols[static_cast<size_t>(left.next)].id));
      if (n != merges_.end()) queue.push({n->second.rank, top.pos, n->second.new_id});
    }
  }
  for (const Symbol &s : symbols)
    if (!s.removed) out.push_back(s.id);
}

}  // namespace vegas
