// One session's state on the GPU: the paged KV pool (DeviceKvCache: bf16 or
// fp8, per layer K and V [num_pages][page_size][n_kv_heads][head_dim]), activation scratch sized
// for ContextParams::max_rows, a stream, cuBLASLt plans and the decode graphs.
//
// A forward call stages every index the kernels need (tokens, positions, KV
// slots, per-sequence row ranges and page tables) in one pinned buffer, copies
// it with one H2D transfer, runs the layers, and copies back only the logits
// (or, with forward_sample, the sampled ids): the single host sync of a step.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_backend_model.h"
#include "backend/cuda/decode_graphs.h"
#include "backend/cuda/device_acceptance.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_draft_chain.h"
#include "backend/cuda/device_kv_cache.h"
#include "backend/cuda/device_row_sampler.h"
#include "backend/cuda/device_selection_sets.h"
#include "backend/cuda/lt_gemm.h"
#include "backend/held_page_tables.h"
#include "kv_select.cuh"
#include "paged_attention.cuh"
#include "sampling.cuh"
#include "small_gemm.cuh"

namespace vegas::cuda {

class CudaContext : public BackendContext {
 public:
  CudaContext(const CudaBackendModel &model, const ContextParams &params);
  ~CudaContext() override;

  const float *forward(const ForwardBatch &batch) override;
  // Device sampling (kernels/sampling.cuh): every rule of build_distribution,
  // penalties included (false for a row with penalties but no history).
  // Throws INVALID_ARGUMENT for a row with a NaN/+inf or all -inf logits
  // (rows decoded by the in-graph argmax, all greedy without penalties, excepted).
  bool forward_sample(const ForwardBatch &batch, const RowSampling *rows,
                      int32_t *tokens_out) override;

  // Logit candidates picked on the device (kernels/logit_candidates.cuh):
  // per row a count and up to kMaxCandidateTopK (id, logit) pairs come back
  // instead of the row; a row with more (ties) or a bad logit is downloaded
  // and cut down by the host. On unless VEGAS_CUDA_CANDIDATES=0 (then
  // false: the caller downloads whole rows).
  bool forward_candidates(const ForwardBatch &batch, const int32_t *k,
                          std::vector<LogitCandidates> *out) override;
  bool begin_candidates(const ForwardBatch &batch, const int32_t *k,
                        const int32_t *fed = nullptr) override;
  void end_candidates(std::vector<LogitCandidates> *out) override;

  // Off with VEGAS_CUDA_DRAFT_CHAIN=0 (or without device candidates).
  bool chains_passes() const override;
  bool forward_draft_chain(const ForwardBatch &first, int32_t steps, const RowSampling *rows,
                           const int32_t *k, int32_t *tokens_out,
                           std::vector<LogitCandidates> *cands) override;
  bool begin_draft_chain(const ForwardBatch &first, int32_t steps, const RowSampling *rows,
                         const int32_t *k) override;
  bool end_draft_chain(int32_t *tokens_out, std::vector<LogitCandidates> *cands) override;

  // kernels/speculative_accept.cuh; off with VEGAS_CUDA_DEVICE_ACCEPT=0.
  bool begin_accept(const std::vector<AcceptOnDevice> &seqs) override;
  void end_accept(std::vector<AcceptedOnDevice> *out) override;

  // Token trees: tree masks in the paged attention kernel (stage_tree), and
  // the accepted path's K/V moved into place (cuda_move_kv.cpp).
  bool token_trees() const override { return true; }
  int32_t cheap_pass_rows() const override;
  void move_kv(const KvMove &move) override;

  bool device_selection() const override { return true; }
  void select_deferred(const std::vector<DeferredSelect> &items) override;
  void forget_selection(int32_t key) override;
  double take_select_seconds() override;

  // Benchmarks: fills every KV slot with pseudo-random values, so decoding at
  // a long context can be timed without prefilling it (attention cost does not
  // depend on the values; zeros would hide faults).
  void randomize_kv(uint64_t seed);
  // Benchmarks: the device time of `batch`'s step (upload of its indices and
  // the graph, argmax included), replayed `n` times back to back and timed with
  // CUDA events; the median. What a step costs the GPU, without the host's share.
  // With `selection` false the replays leave out the device selection a
  // verification step ends with (the phase benchmark times it apart).
  double replay_seconds(const ForwardBatch &batch, int n, bool selection = true);
  // Benchmarks: enqueues `batch`'s step once on this context's stream and
  // returns without waiting (bench_cuda_streams: do two contexts' steps
  // overlap on the device?). synchronize() waits for the stream.
  void enqueue_replay(const ForwardBatch &batch);
  void synchronize();
  // Number of decode graphs captured so far (tests check that replay happens).
  size_t graphs_captured() const { return graphs_.size(); }

 private:
  // The launch shape of one step; rows and sequences include graph padding.
  struct Step {
    int32_t rows = 0;
    int32_t n_seqs = 0;
    int32_t max_rows_per_seq = 0;
    int32_t max_keys = 0;  // the most keys a sequence attends to (its context, dense)
    int32_t n_splits = 1;
    int32_t logit_rows = 0;       // rows the lm_head runs on
    int32_t real_logit_rows = 0;  // of which the caller asked for
    int32_t pages = 0;            // page-table entries staged
    int32_t extra = 0;            // ints of sparse records after the page tables
    int32_t table_from = 0;       // first page-table entry that differs from the device's
    int32_t field_stride = 1;     // entries per staged index field (see stage)
    int32_t cap_slots = 0;        // captured rows of the batch
    int32_t cap_stride = 0;       // the largest n_candidates among them
    bool decode = false;          // one row a sequence, its logits
    bool graph = false;           // replayable: a decode step or a verification pass (stage)
    bool quest = false;           // some sequence drafts with SeqRows::quest
    bool sparse = false;          // every sequence attends to a selected set (drafting)
    bool split_tail = false;      // a captured tail attends to a front written in this step
    bool trees = false;           // some sequence's rows are token-tree nodes (SeqRows::tree)
  };
  // A sequence's score capture and its first slot in the device capture buffers.
  struct PendingCapture {
    const ScoreCapture *cap = nullptr;
    int32_t first_slot = 0;
  };

  Step stage(const ForwardBatch &batch);
  // stage()'s parts: one batch sequence's fields (two staged sequences for a
  // captured tail, capture_split), its capture slots and selection request,
  // and how many splits its keys can use.
  struct StagingCursor;
  void stage_sequence(const ForwardBatch &batch, int32_t i, StagingCursor &cur, Step &st);
  void stage_capture(const SeqRows &s, StagingCursor &cur);
  // A tree sequence si's rows (staged from first_row as consecutive slots):
  // RoPE at base + depth, and its record of ancestor masks.
  void stage_tree(const SeqRows &s, int32_t si, int32_t first_row, StagingCursor &cur,
                  const Step &st);
  int64_t useful_splits_of(const SeqRows &s, int32_t sparse_keys) const;
  int32_t sparse_split_keys(const Step &st) const;
  int64_t padded_rows(int64_t rows) const;  // GEMM rows, see the definition
  void warm_gemm_plans(int32_t rows);       // ContextParams::warm_rows
  bool fused_linear(int32_t rows) const;
  // y = x · Wᵀ for one linear layer whose weight is bf16 `w` (cuBLASLt over
  // gemm_m padded rows) or kept quantized `q` (quant_gemv over the `rows` real
  // rows, eight at a time, a launch per row range, up to kQuantGemvRowsMax
  // rows; beyond, the matrix dequantized into dequant_ for cuBLASLt).
  void run_linear(const void *x, const void *w, const QuantRows &q, void *y, bool y_f32,
                  bool accumulate, int64_t rows, int64_t gemm_m, int64_t n, int64_t k);
  // A one-row step whose CUDA-core decode blocks are the wide ones
  // (wide_decode_allowed in cuda_context.cpp).
  bool wide_decode(const Step &s) const;
  int32_t choose_splits(const Step &s, int64_t useful_splits) const;
  void enqueue(const Step &s, bool with_argmax);
  // Which attention kernels a step's rows take besides the dense prefill and
  // verify ones (attention_params): the paged kernel, or only its merge.
  struct AttentionRoutes {
    bool paged = true;
    bool merge_only = false;
  };
  kernels::PagedAttentionParams attention_params(const Step &s, AttentionRoutes *routes) const;
  // attention_params' routes; sets ap's prefill_min_rows and verify_max_rows,
  // by which the kernels pick their sequences.
  AttentionRoutes attention_routes(const Step &s, kernels::PagedAttentionParams &ap) const;
  // enqueue()'s parts: the launch parameters the step's layers share, then
  // per layer the qkv projection (rope, cache write), the attention, and the
  // o projection with the MLP.
  struct LayerLaunch;
  LayerLaunch layer_launch(const Step &s) const;
  void enqueue_qkv(LayerLaunch &L, const Step &s, int32_t l);
  void enqueue_attention(LayerLaunch &L, const Step &s, int32_t l);
  void enqueue_mlp(LayerLaunch &L, const Step &s, int32_t l);
  // The MLP's gate|up projection and SwiGLU, normed_ into act_.
  void run_gate_up(const LayerLaunch &L, const Step &s, const DeviceLayer &w);
  // After the layers: the final norm and lm_head of the logit rows, the
  // logit mask, the argmax.
  void enqueue_logits(const Step &s, bool small, kernels::SmallGemmParams &sg, bool with_argmax);
  // Device-fed steps (forward_draft_chain): the staged fields come from
  // `fields` (pinned, kept until the step ran) instead of meta_host_, and the
  // input tokens of the first `n` rows from device ids (a previous draw).
  // A verify pass behind a draft chain (begin_candidates' `fed`) keeps
  // meta_host_'s fields and takes its tokens through `from` (device).
  struct StepFeed {
    const int32_t *fields = nullptr;  // null: meta_host_
    const int32_t *ids = nullptr;
    const int32_t *from = nullptr;
    int32_t n = 0;
  };
  // Uploads the staged indices and runs the step (graph replay or eager).
  void launch(const Step &s, bool with_argmax, const StepFeed *feed = nullptr);
  // begin_draft_chain's parts: whether every row of the first pass can be
  // chained (throws for a bad k or rule), and pass j's draws (and
  // candidates) from its n rows.
  bool chain_takes(const ForwardBatch &first, const RowSampling *rows, const int32_t *k) const;
  void enqueue_chain_draws(int32_t j, int32_t n);
  // Picks the candidates of the n logit rows (k per row in cand_k_) into `out`
  // as [count: n][ids: n x cap][logits: n x cap].
  void enqueue_candidates(int32_t n, int32_t *out);
  void grow_page_table(int64_t pages);
  int32_t *meta(const Step &s, int field) const;  // the step's field of the staged indices
  int32_t *tables() const;                        // the staged page tables and records
  void grow_capture(const Step &s);
  // Quest drafting: the score scratch of n_seqs sequences (graphs re-captured on growth).
  void grow_quest_keys(int32_t n_seqs);
  // Re-bounds `pages` (n_listed entries, < 0 skipped; null = every page) when key_bounds.
  void enqueue_quest_bounds(const int32_t *pages, int32_t n_listed);
  // After the step's sync: scatters the downloaded scores into the callers' arrays.
  void deliver_captures(const Step &s);
  // VEGAS_CUDA_TRACE=1, after the step's sync: one line on stderr (launch
  // shape, host staging t0..t1, device time of launch(), wall time, host gap).
  void trace_step(const Step &s, const char *kind, std::chrono::steady_clock::time_point t0,
                  std::chrono::steady_clock::time_point t1);

  const CudaBackendModel &model_;
  ContextParams params_;
  cudaStream_t stream_ = nullptr;
  LtGemm gemm_;
  DeviceGraphs graphs_;

  std::unique_ptr<DeviceKvCache> kv_;
  DeviceBuffer meta_dev_;
  PinnedBuffer meta_host_;
  int64_t page_capacity_ = 0;
  HeldPageTables tables_;  // which staged page tables the device holds
  DeviceBuffer residual_, normed_, qkv_, q_, attn_, gate_up_, act_, logits_, sampled_;
  DeviceBuffer dequant_;  // one quantized matrix as bf16 (steps of many rows)
  DeviceBuffer partial_out_, partial_lse_;
  DeviceBuffer split_counters_;      // decode_attention's in-kernel split merge
  int64_t split_rows_capacity_ = 0;  // n_splits * rows the workspace holds
  PinnedBuffer logits_host_, sampled_host_;
  // forward_candidates: k per row, and per call [count: rows][ids: rows x
  // cap][logits: rows x cap] for its rows, downloaded in one copy.
  DeviceBuffer cand_k_, cand_out_;
  DeviceBuffer cand_scratch_;  // long rows' chunk candidates (grown as rows come)
  PinnedBuffer cand_k_host_, cand_out_host_;
  // A chain begun by begin_draft_chain: what end_draft_chain reads once the
  // chain's download has passed (DeviceDraftChain owns the buffers). Its
  // draws stay on the device for a fed verify pass until the next chain.
  struct PendingChain {
    Step last;
    int32_t steps = 0, n = 0;
    std::chrono::steady_clock::time_point t0, t1;
  };
  std::optional<PendingChain> pending_chain_;
  std::unique_ptr<DeviceDraftChain> chain_;        // forward_draft_chain's passes and draws
  DeviceAcceptance acceptance_;                    // begin_accept / end_accept
  std::unique_ptr<DeviceRowSampler> row_sampler_;  // forward_sample's draws
  // Penalty edits of forward_sample (grown on demand) and their host scratch.
  // Score capture: [n_layers][slots][n_heads][stride] logits and
  // [n_layers][slots][n_heads] lse, grown on demand (capture steps run eagerly).
  DeviceBuffer cap_logits_, cap_lse_;
  PinnedBuffer cap_logits_host_, cap_lse_host_;
  int64_t cap_capacity_ = 0;      // fp16 scores of cap_logits_
  int64_t cap_lse_capacity_ = 0;  // floats of cap_lse_
  std::vector<PendingCapture> pending_;
  // A pass begun by begin_candidates and not yet ended.
  struct PendingCandidates {
    Step step;
    std::chrono::steady_clock::time_point t0, t1;
    std::vector<int32_t> k;
  };
  std::optional<PendingCandidates> pending_cand_;

  std::unique_ptr<DeviceSelectionSets> selection_;  // the sets selected on the device
  // Quest drafting (ContextParams::key_bounds, kernels/quest_select.cuh): per
  // layer and KV page the min/max of its keys, [n_layers][num_pages][kv_dim]
  // bf16 each, re-bounded after every step for the pages it wrote; the page
  // scores of each quest sequence, [quest_key_rows_][num_pages].
  DeviceBuffer key_min_, key_max_, quest_keys_;
  // move_kv's slot lists and written pages, grown on demand.
  DeviceBuffer move_lists_;
  size_t move_capacity_ = 0;
  int32_t quest_key_rows_ = 0;
  bool trace_ = false;
  // Device events around a step (its forward pass ends at trace_forward_), and
  // the host's time spent enqueueing it: where device time is no more than
  // that, the step waited on its launches.
  cudaEvent_t trace_begin_ = nullptr, trace_forward_ = nullptr, trace_end_ = nullptr;
  double trace_enqueue_ms_ = 0.0;
  bool replay_without_selection_ = false;  // replay_seconds(..., selection = false)
  // enqueue_replay: the batch staged last and its upload's event.
  const ForwardBatch *replay_last_ = nullptr;
  cudaEvent_t replay_uploaded_ = nullptr;
  bool replay_upload_pending_ = false;
  std::chrono::steady_clock::time_point trace_last_end_{};  // host time between forwards
};

}  // namespace vegas::cuda
