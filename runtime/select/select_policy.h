// The interface of a KV selection policy (DESIGN §3 step 5, §5). A policy is
// called once per (layer, sequence) and writes the candidate positions that
// drafting attends to, ascending, into the caller's fixed-capacity buffer.
// Candidates are the positions [0, n); drafting also attends to every position
// >= n (tokens after the selection point), which are never candidates.
//
// No allocation happens per round: a policy sizes its scratch from the
// SelectionShape it is made with and rejects inputs beyond it. The device
// version keeps the same contract (fixed buffers sized at session creation).
// A policy is driven by one thread at a time (it owns mutable scratch).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "select/select_options.h"

namespace vegas {

// The model and session dimensions a policy's scratch is sized from.
struct SelectionShape {
  int32_t max_candidates = 0;  // largest n ever passed (the session's max context)
  int32_t max_rows = 1;        // most verify rows a ScoreView carries (gamma + 1)
  int32_t n_heads = 0;         // query heads
  int32_t n_kv_heads = 0;      // divides n_heads
  int32_t head_dim = 0;
};

// Scores the verification pass collected for one (layer, sequence). Row j is the
// j-th collected verify row: with ScoreRows::kFirstLast the backend collects r0
// and r_gamma (or only the last prompt row after prefill), with kAll all rows.
struct ScoreView {
  // logits[(row * n_heads + head) * stride + pos] = scale * q.k for pos in [0, n):
  // the pre-softmax logit, exactly what the attention's softmax saw.
  const float *logits = nullptr;
  // lse[row * n_heads + head]: log-sum-exp of that row/head's logits over every
  // key it attended to (candidates and the causal tail after them).
  const float *lse = nullptr;
  int32_t n_rows = 0;
  int64_t stride = 0;  // >= n
};

// Quest's per-page key bounds for one layer. Page i covers positions
// [i * quest_page_size, min(n, (i + 1) * quest_page_size)).
struct PageBoundsView {
  const float *key_min = nullptr;  // [n_pages][n_kv_heads][head_dim]
  const float *key_max = nullptr;  // same layout
  int32_t n_pages = 0;             // >= ceil(n / quest_page_size)
};

// A sequence's own values of the budget knobs (automatic tuning gives each
// sequence its ratio and window share, runtime/speculative/auto_tuning.h); a
// negative field keeps the policy's option.
struct BudgetKnobs {
  float ratio = -1.0f;
  float window_share = -1.0f;
};

struct SelectInput {
  int32_t seq_id = 0;
  int32_t layer = 0;
  int32_t n_layers = 1;
  int32_t n = 0;  // candidates [0, n)
  // specextend: the row whose query was the last accepted token (the number of
  // drafts accepted this round; 0 = r0, and 0 after prefill).
  int32_t last_accepted_row = 0;
  ScoreView scores;
  // quest: the current draft query of this layer, [n_heads][head_dim], post-RoPE.
  const float *query = nullptr;
  PageBoundsView pages;
  BudgetKnobs knobs;
  // CPU threads the policy may use (the model's n_threads, resolved): its
  // score reduction shares them.
  int32_t threads = 1;
};

// Which verify rows' logits and lse the attention must write for the policy.
enum class ScoreRows { kNone, kFirstLast, kAll };

struct SelectionNeeds {
  ScoreRows score_rows = ScoreRows::kNone;
  bool page_bounds = false;       // quest: key min/max per page
  bool every_draft_step = false;  // select before each draft step, not once per round
};

// A policy's form for backends that select on the device
// (BackendContext::device_selection, kernels/kv_select.cuh): keep candidates
// [0, head) and [n - tail, n) and the best `scored` of the rest by the mean
// weight (or logit) of the captured rows.
struct DevicePlan {
  int32_t head = 0;
  int32_t tail = 0;
  int32_t scored = 0;
  bool weight = true;
  bool last_accepted = false;  // reduce only the last accepted row (chosen after acceptance)
};

// A policy's form for selecting inside every draft step from the draft query
// (needs().every_draft_step: quest), which backends run in their layer loop
// (backend.h: QuestDraft): pages of `page_size` candidates scored by their
// q.k upper bound, the best kept while they fit `budget` tokens.
struct QueryAwarePlan {
  int32_t page_size = 0;
  int32_t budget = 0;
};

class SelectionPolicy {
 public:
  virtual ~SelectionPolicy() = default;
  virtual const std::string &name() const = 0;
  virtual SelectionNeeds needs() const = 0;
  // Writes the selected positions, strictly ascending, into out[0, count) and
  // returns count (<= n). Throws vegas::Error: INVALID_ARGUMENT for an input
  // outside the shape or missing data the policy needs, BUFFER_TOO_SMALL when
  // capacity < n (every policy may need up to n).
  virtual int32_t select(const SelectInput &in, int32_t *out, int32_t capacity) = 0;
  // Sequence seq_id has ended; policies with per-sequence state drop it.
  virtual void reset(int32_t seq_id) { (void)seq_id; }
  // The device form of this policy for n candidates with a sequence's budget
  // knobs; false when it has none (the scores then come back to the host and
  // select() runs).
  virtual bool device_plan(int32_t n, const BudgetKnobs &knobs, DevicePlan *plan) const {
    (void)n;
    (void)knobs;
    (void)plan;
    return false;
  }
  bool device_plan(int32_t n, DevicePlan *plan) const {
    return device_plan(n, BudgetKnobs{}, plan);
  }
  // The query-aware form of this policy for n candidates; false when it has
  // none. select() with the same query, page bounds and knobs chooses the same set.
  virtual bool query_aware_plan(int32_t n, const BudgetKnobs &knobs, QueryAwarePlan *plan) const {
    (void)n;
    (void)knobs;
    (void)plan;
    return false;
  }
  bool query_aware_plan(int32_t n, QueryAwarePlan *plan) const {
    return query_aware_plan(n, BudgetKnobs{}, plan);
  }
};

// Policies: "vegas", "vegas-all", "specextend", "streaming", "quest", "topp",
// "full", "user" (options.user required). Throws UNSUPPORTED naming an unknown
// policy, INVALID_ARGUMENT for bad options or shape (and for "topp" with logit
// scores: a mass needs weights).
std::unique_ptr<SelectionPolicy> make_selection_policy(const std::string &name,
                                                       const SelectionOptions &options,
                                                       const SelectionShape &shape);

}  // namespace vegas
