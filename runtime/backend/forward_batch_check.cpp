#include "backend/forward_batch_check.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/error.h"

namespace vegas {
namespace {

[[noreturn]] void bad_seq(size_t i, const std::string &what) {
  fail(VEGAS_ERR_INVALID_ARGUMENT, "forward batch: sequence " + std::to_string(i) + ": " + what);
}

// Drafting rows: per layer an ascending list of positions below `prefix`,
// and prefix no later than the first row (each row attends [prefix, itself]).
void check_sparse(size_t i, const SeqRows &s, const SparseAttention &sp, int32_t n_layers) {
  if (sp.prefix < 0 || sp.prefix > s.start_pos) {
    bad_seq(i, "sparse prefix " + std::to_string(sp.prefix) + " outside [0, start_pos " +
                   std::to_string(s.start_pos) + "]");
  }
  if (sp.counts == nullptr || sp.stride < 0) bad_seq(i, "sparse counts NULL or stride < 0");
  for (int32_t l = 0; l < n_layers; ++l) {
    const int32_t n = sp.counts[l];
    if (n < 0 || n > sp.stride) {
      bad_seq(i, "sparse count " + std::to_string(n) + " of layer " + std::to_string(l) +
                     " outside [0, stride " + std::to_string(sp.stride) + "]");
    }
    if (n > 0 && sp.positions == nullptr) bad_seq(i, "sparse positions is NULL");
    const int32_t *p = sp.positions + int64_t{l} * sp.stride;
    for (int32_t j = 0; j < n; ++j) {
      if (p[j] < 0 || p[j] >= sp.prefix || (j > 0 && p[j] <= p[j - 1])) {
        bad_seq(i, "sparse positions of layer " + std::to_string(l) +
                       " must ascend strictly within [0, prefix " + std::to_string(sp.prefix) +
                       "); entry " + std::to_string(j) + " is " + std::to_string(p[j]));
      }
    }
  }
}

// Verification rows: full attention, and every captured row sees all candidates.
void check_capture(size_t i, const SeqRows &s, const ScoreCapture &cap) {
  if (s.sparse != nullptr) bad_seq(i, "score capture needs full attention, not a sparse set");
  if (cap.n_rows < 0 || cap.n_candidates < 0) bad_seq(i, "capture sizes < 0");
  const bool on_device = s.device_select != nullptr;  // scores stay on the device
  if (cap.n_rows > 0 &&
      (cap.rows == nullptr || (!on_device && (cap.logits == nullptr || cap.lse == nullptr)))) {
    bad_seq(i, "capture rows, logits or lse is NULL");
  }
  for (int32_t c = 0; c < cap.n_rows; ++c) {
    const int32_t r = cap.rows[c];
    if (r < 0 || r >= s.n_tokens) {
      bad_seq(i, "capture row " + std::to_string(r) + " outside [0, " + std::to_string(s.n_tokens) +
                     ")");
    }
    if (int64_t{s.start_pos} + r + 1 < cap.n_candidates) {
      bad_seq(i, "capture row " + std::to_string(r) + " at position " +
                     std::to_string(s.start_pos + r) + " cannot see " +
                     std::to_string(cap.n_candidates) + " candidates");
    }
    for (int32_t c2 = 0; c2 < c; ++c2) {
      if (cap.rows[c2] == r) bad_seq(i, "capture row " + std::to_string(r) + " listed twice");
    }
  }
}

void check_device_select(size_t i, const SeqRows &s, const DeviceSelection &sel) {
  if (s.capture == nullptr) bad_seq(i, "device selection without a score capture");
  const int64_t n = s.capture->n_candidates;
  if (sel.key < 0 || sel.head < 0 || sel.tail < 0 || sel.scored < 0 ||
      int64_t{sel.head} + sel.tail + sel.scored > n)
    bad_seq(i, "device selection key " + std::to_string(sel.key) + ", head " +
                   std::to_string(sel.head) + ", tail " + std::to_string(sel.tail) + ", scored " +
                   std::to_string(sel.scored) + " do not fit " + std::to_string(n) + " candidates");
  if (sel.scored > 0 && s.capture->n_rows == 0) bad_seq(i, "device selection scores no row");
}

// Quest drafting: one row, attending to what it selects below prefix and to
// [prefix, itself]; nothing else asked of it.
void check_quest(size_t i, const SeqRows &s, const QuestDraft &q, const ContextParams &params) {
  if (!params.key_bounds) bad_seq(i, "quest drafting needs a context made with key_bounds");
  if (s.n_tokens != 1)
    bad_seq(i, "quest drafting takes one row, not " + std::to_string(s.n_tokens));
  if (q.prefix < 0 || q.prefix > s.start_pos || q.budget < 0)
    bad_seq(i, "quest prefix " + std::to_string(q.prefix) + " outside [0, start_pos " +
                   std::to_string(s.start_pos) + "] or budget " + std::to_string(q.budget) +
                   " < 0");
  if (s.sparse != nullptr || s.capture != nullptr || s.device_select != nullptr ||
      s.device_sparse_key >= 0)
    bad_seq(i, "quest drafting with a sparse set, score capture or device selection");
}

// Tree rows: nodes of a level-ordered tree that the rows lie in; they attend
// to the cache before the tree's base, so a sparse prefix or capture
// candidates reach no further; no query-aware drafting.
void check_tree(size_t i, const SeqRows &s, const TokenTree &t) {
  if (t.base < 0 || t.n_nodes <= 0 || t.parents == nullptr)
    bad_seq(i, "token tree base " + std::to_string(t.base) + ", " + std::to_string(t.n_nodes) +
                   " nodes or NULL parents");
  if (s.start_pos < t.base || int64_t{s.start_pos} + s.n_tokens > int64_t{t.base} + t.n_nodes)
    bad_seq(i, "rows at slots [" + std::to_string(s.start_pos) + ", " +
                   std::to_string(int64_t{s.start_pos} + s.n_tokens) +
                   ") outside the token tree's [" + std::to_string(t.base) + ", " +
                   std::to_string(int64_t{t.base} + t.n_nodes) + ")");
  if (t.parents[0] != -1) bad_seq(i, "token tree root's parent is not -1");
  for (int32_t n = 1; n < t.n_nodes; ++n)
    if (t.parents[n] < 0 || t.parents[n] >= n)
      bad_seq(i, "token tree node " + std::to_string(n) + " has parent " +
                     std::to_string(t.parents[n]) + ", not an earlier node");
  if (s.sparse != nullptr && s.sparse->prefix > t.base)
    bad_seq(i, "sparse prefix " + std::to_string(s.sparse->prefix) +
                   " past the token tree's base " + std::to_string(t.base));
  if (s.capture != nullptr && s.capture->n_candidates > int64_t{t.base} + 1)
    bad_seq(i, "capture of " + std::to_string(s.capture->n_candidates) +
                   " candidates past the token tree's root");
  if (s.quest != nullptr) bad_seq(i, "token tree with quest drafting");
}

}  // namespace

int64_t pages_needed(const SeqRows &s, const ContextParams &params) {
  return (int64_t{s.start_pos} + s.n_tokens + params.page_size - 1) / params.page_size;
}

int64_t valid_page_entries(const SeqRows &s, const ContextParams &params) {
  int64_t valid = pages_needed(s, params);
  while (valid < s.n_pages && s.page_table[valid] >= 0 && s.page_table[valid] < params.num_pages)
    ++valid;
  return valid;
}

void check_page_entries(const ForwardBatch &batch, size_t i, const ContextParams &params) {
  const SeqRows &s = batch.seqs[i];
  const int64_t needed = pages_needed(s, params);
  // One branch-free pass (tables of long batches hold tens of thousands of
  // entries a step), then the culprit.
  uint32_t highest = 0;
  for (int64_t p = 0; p < needed; ++p)
    highest = std::max(highest, static_cast<uint32_t>(s.page_table[p]));  // < 0 wraps high
  for (int64_t p = 0; highest >= static_cast<uint32_t>(params.num_pages) && p < needed; ++p) {
    const int32_t page = s.page_table[p];
    if (page < 0 || page >= params.num_pages) {
      bad_seq(i, "page table entry " + std::to_string(p) + " is page " + std::to_string(page) +
                     ", the pool has " + std::to_string(params.num_pages));
    }
  }
}

void check_forward_batch(const ForwardBatch &batch, const ModelConfig &config,
                         const ContextParams &params, PageEntries entries) {
  const int32_t vocab_size = config.vocab_size;
  if (batch.seqs.empty()) fail(VEGAS_ERR_INVALID_ARGUMENT, "forward batch: no sequences");
  const int64_t capacity = int64_t{params.num_pages} * params.page_size;
  int64_t total = 0;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SeqRows &s = batch.seqs[i];
    if (s.n_tokens <= 0) bad_seq(i, "n_tokens " + std::to_string(s.n_tokens) + " <= 0");
    if (s.tokens == nullptr) bad_seq(i, "tokens is NULL");
    if (s.start_pos < 0) bad_seq(i, "start_pos " + std::to_string(s.start_pos) + " < 0");
    const int64_t end = int64_t{s.start_pos} + s.n_tokens;
    if (end > capacity) {
      bad_seq(i, "positions up to " + std::to_string(end) + " exceed the KV pool's " +
                     std::to_string(capacity) + " slots");
    }
    const int64_t needed = pages_needed(s, params);
    if (s.page_table == nullptr || s.n_pages < needed) {
      bad_seq(i, "page table has " + std::to_string(s.page_table ? s.n_pages : 0) +
                     " pages, positions up to " + std::to_string(end) + " need " +
                     std::to_string(needed));
    }
    if (entries == PageEntries::kChecked) check_page_entries(batch, i, params);
    for (int32_t r = 0; r < s.n_tokens; ++r) {
      const int32_t id = s.tokens[r];
      if (id < 0 || id >= vocab_size) {
        fail(VEGAS_ERR_TOKEN_OUT_OF_RANGE, "forward batch: sequence " + std::to_string(i) +
                                               ": token " + std::to_string(id) + " at row " +
                                               std::to_string(r) + " is outside [0, " +
                                               std::to_string(vocab_size) + ")");
      }
    }
    if (s.sparse != nullptr) check_sparse(i, s, *s.sparse, config.n_layers);
    if (s.capture != nullptr) check_capture(i, s, *s.capture);
    if (s.device_select != nullptr) check_device_select(i, s, *s.device_select);
    if (s.quest != nullptr) check_quest(i, s, *s.quest, params);
    if (s.tree != nullptr) check_tree(i, s, *s.tree);
    if (s.device_sparse_key >= 0 && s.sparse != nullptr)
      bad_seq(i, "both a host sparse set and a device set (device_sparse_key)");
    total += s.n_tokens;
  }
  if (total > params.max_rows) {
    fail(VEGAS_ERR_INVALID_ARGUMENT, "forward batch: " + std::to_string(total) +
                                         " rows exceed the context's max_rows " +
                                         std::to_string(params.max_rows));
  }
}

}  // namespace vegas
