// The compute backend interface. A BackendModel holds the weights on one
// device (made once per vegas_model); a BackendContext holds one session's KV
// storage and scratch and runs forward passes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace vegas {

enum class BackendKind { kCpu, kCuda };

// Sparse drafting (DESIGN §3 step 2): in layer l a row attends to
// positions[l * stride + 0 .. counts[l]) (ascending, all < prefix) and to every
// position from `prefix` up to its own.
struct SparseAttention {
  int32_t prefix = 0;
  const int32_t *positions = nullptr;  // [n_layers][stride]
  const int32_t *counts = nullptr;     // [n_layers]
  int32_t stride = 0;
};

// Verification scores (DESIGN §3 step 3, §5): for the listed rows of the
// sequence, per layer and query head, the scaled logits scale * q.k over the
// candidate positions [0, n_candidates) and the row's log-sum-exp over every
// position it attended to, so softmax weights are exp(logit - lse).
struct ScoreCapture {
  int32_t n_candidates = 0;
  const int32_t *rows = nullptr;  // row indices within this sequence's new rows
  int32_t n_rows = 0;
  float *logits = nullptr;  // [n_layers][n_rows][n_heads][n_candidates]
  float *lse = nullptr;     // [n_layers][n_rows][n_heads]
};

// Selection on the device (DESIGN §5, kernels/kv_select.cuh): the set of each
// layer is the candidates [0, head) and [n - tail, n) plus the best `scored` of
// the rest, ranked by the mean over the captured rows and query heads of the
// softmax weight (weight) or logit. With `deferred` the scores are kept and
// BackendContext::select_deferred later names the one row to use (specextend).
struct DeviceSelection {
  int32_t key = -1;  // names the kept set; the caller's sequence id
  int32_t head = 0;
  int32_t tail = 0;
  int32_t scored = 0;
  bool weight = true;
  bool deferred = false;
};

// Query-aware page selection of one draft row (policy quest, DESIGN §5). In
// every layer, once the row's query and key are computed and before it
// attends, the backend scores each page of the candidates [0, prefix) by the
// upper bound of q.k over the page's keys, the sum over query heads h and dims
// d of max(q_hd * kmin_d, q_hd * kmax_d) (element-wise min/max of the page's
// keys of h's KV head; select/quest_pages.h), and the row attends to the best
// pages that fit `budget` tokens (select_quest_pages' rule), then to every
// position from prefix to its own. Quest pages are the KV pages: page i covers
// [i * page_size, min(prefix, (i + 1) * page_size)), so the bounds of the full
// pages are kept per KV page as forward passes write K (ContextParams::
// key_bounds) and only the partial last page is bounded from its keys on the
// spot. One row (n_tokens == 1) with prefix <= start_pos.
struct QuestDraft {
  int32_t prefix = 0;
  int32_t budget = 0;  // >= 0; prefix or more keeps every candidate
};

// A token tree of drafts (LongSpec's tree verification, DESIGN §3): node i
// of the tree sits in KV slot base + i and at RoPE position base + depth(i),
// where depth(0) = 0 and depth(i) = depth(parents[i]) + 1. Nodes are in level
// order: parents[0] = -1 (the root follows the cache's [0, base)) and
// parents[i] < i. A tree row attends to [0, base) (a drafting row: to its
// sparse set below sparse->prefix and to [prefix, base)) and to the slots of
// its ancestors and itself, so sibling branches never see each other. With a
// tree, SeqRows' start_pos counts slots: its rows are the nodes
// start_pos - base .. start_pos - base + n_tokens - 1.
struct TokenTree {
  int32_t base = 0;
  const int32_t *parents = nullptr;  // [n_nodes]
  int32_t n_nodes = 0;
};

// New rows of one sequence in a forward batch.
struct SeqRows {
  const int32_t *tokens = nullptr;  // n_tokens ids
  int32_t n_tokens = 0;
  int32_t start_pos = 0;                // position of tokens[0] = tokens already in the KV
  const int32_t *page_table = nullptr;  // covers start_pos + n_tokens slots
  int32_t n_pages = 0;
  // Which rows need logits: none, the last one, or all (verification).
  enum class Logits { kNone, kLast, kAll } logits = Logits::kLast;
  const SparseAttention *sparse = nullptr;  // optional: sparse drafting
  const ScoreCapture *capture = nullptr;    // optional: selection scores
  // Backends with device_selection() only: with `device_select`, the captured
  // scores stay on the device (capture->logits/lse may be NULL) and select the
  // set kept under device_select->key; device_sparse_key >= 0 drafts with the
  // set kept under that key (instead of `sparse`).
  const struct DeviceSelection *device_select = nullptr;
  int32_t device_sparse_key = -1;
  // With device_sparse_key: how many keys the set makes the last row attend
  // (selected + positions after the selection point); sizes the launch only.
  int32_t device_sparse_span = 0;
  const QuestDraft *quest = nullptr;  // optional: query-aware drafting (needs key_bounds)
  const TokenTree *tree = nullptr;    // optional: the rows are nodes of a tree (token_trees())
};

// K and V of one sequence copied within its slots (BackendContext::move_kv):
// position from[i] to to[i] in every layer, in order i = 0, 1, ...
struct KvMove {
  const int32_t *page_table = nullptr;  // covers every listed position
  int32_t n_pages = 0;
  const int32_t *from = nullptr;
  const int32_t *to = nullptr;
  int32_t n = 0;
};

struct ForwardBatch {
  std::vector<SeqRows> seqs;

  int32_t total_rows() const {
    int32_t n = 0;
    for (const auto &s : seqs) n += s.n_tokens;
    return n;
  }
  int32_t logit_rows() const {
    int32_t n = 0;
    for (const auto &s : seqs)
      n += s.logits == SeqRows::Logits::kAll ? s.n_tokens : s.logits == SeqRows::Logits::kLast;
    return n;
  }
};

struct SamplingParams;
struct LogitCandidates;

// The sampling rule of one logit row for BackendContext::forward_sample.
struct RowSampling {
  const SamplingParams *params = nullptr;
  uint64_t rng_counter = 0;  // the row's sequence Rng counter before this draw
  // The sequence's tokens (prompt and generated) for params' penalties; with
  // penalties and history == NULL, forward_sample declines the batch.
  const int32_t *history = nullptr;
  int32_t history_len = 0;
};

struct ContextParams {
  int32_t num_pages = 0;
  int32_t page_size = 16;
  int32_t max_rows = 512;  // most rows one forward() call carries
  // Keep the element-wise min/max of every KV page's keys, per layer, current
  // as forward passes write K, for SeqRows::quest (memory: 2 / page_size of
  // the K cache, in the cache's precision; time: each written page re-bounded
  // once per forward call).
  bool key_bounds = false;
  // K and V stored as e4m3 with a power-of-two scale per (token, KV head)
  // (kernels/kv_fp8.cuh): half the bytes a token on CUDA, so steps that read
  // the context run up to twice as fast and the pool holds twice the tokens.
  // The CPU backend rounds its f32 cache to the same values (same outputs,
  // no memory saved).
  bool kv_fp8 = false;
  // > 0: steps of up to this many rows will come early (a speculative
  // session's verification passes): a backend that plans work per shape on
  // first use (cuBLASLt) may do it when the context is made, not inside the
  // first steps.
  int32_t warm_rows = 0;
  // > 0 (and < the model's vocabulary): the logits of ids from here on are
  // -inf, so no reader of them draws an id the tokenizer cannot decode (an
  // embedding with more rows than the tokenizer has tokens).
  int32_t logit_limit = 0;
};

class BackendContext {
 public:
  virtual ~BackendContext() = default;
  // Runs the model over every sequence's new rows, writing their K/V into the
  // slots their page tables give, and returns the logits of the requested rows
  // ([batch.logit_rows()][vocab] f32, host memory, in batch order), valid until
  // the next call. Throws vegas::Error (BACKEND on device faults).
  virtual const float *forward(const ForwardBatch &batch) = 0;
  // Optional: runs forward() and draws each logit row's token on the device,
  // writing batch.logit_rows() ids to `tokens_out` (host) without copying
  // logits back. `rows` has one entry per logit row. Returns false, having
  // done nothing, when this backend cannot sample some row's rule on the
  // device; the caller then uses forward() and samples on the host.
  virtual bool forward_sample(const ForwardBatch &batch, const RowSampling *rows,
                              int32_t *tokens_out) {
    (void)batch;
    (void)rows;
    (void)tokens_out;
    return false;
  }

  // Optional: forward() cut down to each logit row's candidates for k[i] in
  // [1, kMaxCandidateTopK] (one entry per logit row; sampling.h:
  // LogitCandidates), picked where the logits are so that only those move:
  // (*out)[i] is extract_candidates of row i. Returns false, having done
  // nothing, when this backend cannot; the caller then uses forward() and
  // extract_candidates. Throws as forward(), and as extract_candidates for a
  // row with a NaN or +inf logit or no finite one.
  virtual bool forward_candidates(const ForwardBatch &batch, const int32_t *k,
                                  std::vector<LogitCandidates> *out) {
    (void)batch;
    (void)k;
    (void)out;
    return false;
  }

  // Optional: forward_candidates in two halves, so the caller can work while
  // the pass runs. begin_candidates enqueues the pass and returns at once
  // (false, having done nothing, when this backend cannot); end_candidates
  // waits for it and gives what forward_candidates would. Nothing else may be
  // called on the context in between, but end_draft_chain for a chain begun
  // before. `fed` (may be null), one entry per token row of the batch: the
  // index j * rows + i of the draw of the last chain (begin_draft_chain) that
  // replaces the row's token on the device, or -1 to keep it: a verify pass
  // enqueued behind its drafts before the host has seen them.
  virtual bool begin_candidates(const ForwardBatch &batch, const int32_t *k,
                                const int32_t *fed = nullptr) {
    (void)batch;
    (void)k;
    (void)fed;
    return false;
  }
  virtual void end_candidates(std::vector<LogitCandidates> *out) { (void)out; }

  // Optional: the lossless acceptance (sampling/speculative_accept.h) of a
  // verify pass begun by begin_candidates with `fed` draws of the last draft
  // chain, run on the device from both passes' candidates: call it right after
  // begin_candidates; end_candidates then waits for it too, and end_accept
  // gives one result per entry of `seqs`. Returns false, having done nothing,
  // where this backend cannot.
  struct AcceptOnDevice {
    int32_t first_row = 0;  // its verify rows: logit rows first_row .. first_row + gamma
    int32_t gamma = 0;      // draft j is the chain's draw of pass j for row chain_row
    int32_t chain_row = -1;
    const SamplingParams *params = nullptr;
    uint64_t rng_counter = 0;  // the sequence's Rng counter before its first acceptance draw
  };
  struct AcceptedOnDevice {
    bool ok = false;  // false: a row overflowed or was bad; the host accepts this sequence
    int32_t n_accepted = 0;
    uint64_t draws = 0;           // Rng draws the acceptance used
    std::vector<int32_t> tokens;  // the kept drafts, then the corrected or bonus token
  };
  virtual bool begin_accept(const std::vector<AcceptOnDevice> &seqs) {
    (void)seqs;
    return false;
  }
  virtual void end_accept(std::vector<AcceptedOnDevice> *out) { (void)out; }

  // Whether forward_draft_chain may run at all here (it can still decline a
  // batch): callers reserve KV for a chain only then.
  virtual bool chains_passes() const { return false; }

  // Optional: a speculative round's `steps` draft passes in one call, the
  // host reading their results once. `first` is pass 0: one row per
  // sequence, Logits::kLast, no quest, host sparse record or capture. Pass j
  // runs each row at start_pos + j (device_sparse_span + j) on the token pass
  // j - 1 drew for it (fed on the device), draws the row's token with
  // rows[i]'s rule as forward_sample does (a sampled row's draw j at
  // rng_counter + j; greedy rows draw nothing random) and picks its
  // candidates for k[i] as forward_candidates does. Writes tokens_out
  // [steps][rows] and (*cands)[j * rows + i]. Returns false when it cannot
  // (rule, shape, or a candidate overflow found afterwards); the K/V it may
  // have written is what the same passes run one by one write, so the caller
  // then runs them so. Throws as forward_sample for a bad row.
  virtual bool forward_draft_chain(const ForwardBatch &first, int32_t steps,
                                   const RowSampling *rows, const int32_t *k, int32_t *tokens_out,
                                   std::vector<LogitCandidates> *cands) {
    (void)first;
    (void)steps;
    (void)rows;
    (void)k;
    (void)tokens_out;
    (void)cands;
    return false;
  }

  // Optional: forward_draft_chain in two halves. begin_draft_chain enqueues
  // the passes (false, having done nothing, where forward_draft_chain declines
  // up front); end_draft_chain waits for them alone and gives its results.
  // A false from end_draft_chain (a candidate overflow) leaves the caller the
  // draws it may have fed to a later pass, but no candidates for them.
  virtual bool begin_draft_chain(const ForwardBatch &first, int32_t steps, const RowSampling *rows,
                                 const int32_t *k) {
    (void)first;
    (void)steps;
    (void)rows;
    (void)k;
    return false;
  }
  virtual bool end_draft_chain(int32_t *tokens_out, std::vector<LogitCandidates> *cands) {
    (void)tokens_out;
    (void)cands;
    return false;
  }

  // Rows a pass carries at about the cost of a few (0: its cost grows with
  // the rows, as on the CPU): what a lookup round of few sequences may spend
  // on drafts past γ (SpeculativeDecoder::set_wide_lookup_rows).
  virtual int32_t cheap_pass_rows() const { return 0; }

  // Whether SeqRows::tree and move_kv are supported (token-tree rounds).
  virtual bool token_trees() const { return false; }
  // Optional (with token_trees()): copies K and V as `move` lists, so that a
  // tree's accepted path, verified in the slots of its nodes, lands in the
  // slots of its positions. The last forward's logits stay valid. Throws
  // INVALID_ARGUMENT for a position outside the table or a bad table entry.
  virtual void move_kv(const KvMove &move) {
    (void)move;
    fail(VEGAS_ERR_UNSUPPORTED, "this backend has no token trees (move_kv)");
  }

  // Whether SeqRows::device_select / device_sparse_key are supported.
  virtual bool device_selection() const { return false; }
  // For sets whose forward pass had deferred=true: select from captured row
  // `row` (an index into that capture's rows) of each key. Asynchronous.
  struct DeferredSelect {
    int32_t key = -1;
    int32_t row = 0;
  };
  virtual void select_deferred(const std::vector<DeferredSelect> &items) { (void)items; }
  // Frees the set kept under `key` (the sequence ended).
  virtual void forget_selection(int32_t key) { (void)key; }
  // Time spent selecting since the last call, in seconds: device selection,
  // and the quest selection inside draft passes where the backend can tell it
  // apart (the CPU backend; on CUDA it is part of the draft step's time).
  virtual double take_select_seconds() { return 0.0; }
};

class BackendModel {
 public:
  virtual ~BackendModel() = default;
  virtual BackendKind kind() const = 0;
  virtual const ModelConfig &config() const = 0;
  virtual uint64_t weight_bytes() const = 0;
  // Bytes of K and V for one token over all layers on this backend, with
  // the bf16 or the fp8 cache (ContextParams::kv_fp8).
  virtual uint64_t kv_bytes_per_token(bool fp8) const = 0;
  // Throws OUT_OF_MEMORY when the pool cannot be allocated.
  virtual std::unique_ptr<BackendContext> create_context(const ContextParams &params) = 0;
  // Copy bandwidth of the memory the weights live in, bytes read + written per
  // second (median of several large copies), for the decode floor (DESIGN §7).
  // Throws OUT_OF_MEMORY when the scratch buffers cannot be allocated.
  virtual double measure_copy_bandwidth() const = 0;
};

// The most CPU threads a model may ask for: far above any host's cores, and
// far below counts that make OpenMP fail inside the host (2^31 - 1 made
// libgomp call exit; 100000 crashed).
constexpr int32_t kMaxCpuThreads = 1024;

struct CpuBackendOptions {
  int32_t n_threads = 0;  // 0 = all cores (OpenMP's default team size), at most kMaxCpuThreads
  // May be empty; called with values in [0,1]; returns false to cancel.
  std::function<bool(float)> progress;
};

// Converts the weights to f32 on the host. `options.progress` (may be empty)
// is called with values in [0,1] and returns false to cancel (throws CANCELLED).
std::unique_ptr<BackendModel> create_cpu_backend(const ModelConfig &config,
                                                 const ModelWeights &weights,
                                                 const CpuBackendOptions &options);

}  // namespace vegas
