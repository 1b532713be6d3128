// A session: one KV pool, the sequences decoded together, and the step loop
// (DESIGN §2–3). Driven by one thread at a time; cancel() is the only member
// safe to call concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_pool.h"
#include "model/model.h"
#include "sampling/sampling.h"
#include "session/mode_chooser.h"
#include "session/sequence.h"
#include "session/sequence_kv.h"
#include "session/step_scheduler.h"
#include "speculative/speculative_decoder.h"

namespace vegas {

struct SessionParams {
  uint64_t kv_bytes = 0;  // 0 = backend default
  int32_t page_size = 16;
  int32_t max_batch = 64;
  int32_t prefill_chunk = 512;
  bool prefill_first = false;  // VEGAS_SCHEDULE_PREFILL_FIRST
  bool speculative = false;    // VEGAS mode: draft/verify rounds instead of one token per step
  // VEGAS_MODE_AUTO (with speculative): each decode step a round or a vanilla
  // step, whichever has been faster here (ModeChooser).
  bool auto_mode = false;
  // Full KV pages of earlier sequences serve new ones with the same prefix (KvPool).
  bool prefix_cache = true;
  bool kv_fp8 = false;  // ContextParams::kv_fp8 (VEGAS_KV_FP8)
  // Vanilla decode steps run this many at a time on a backend that chains
  // them (each step's tokens fed to the next on the device, the host reading
  // them once): the host's share of a step overlaps nothing else, so it is
  // paid once per chain. 1 = a step at a time.
  int32_t vanilla_chain = 4;
  // Rows a lookup round of few sequences may total with drafts past γ
  // (SpeculativeDecoder::set_wide_lookup_rows): -1 = the backend's
  // cheap_pass_rows (0 on the CPU, whose passes cost by the row).
  int32_t wide_lookup_rows = -1;
  // Tests only: the seconds auto mode (and a hybrid's chooser) sees for a
  // timed decode step of `kind`, given its measured wall time; empty = the
  // wall time. Wall time on a loaded machine can make either kind lead, so a
  // test of what follows from a lead chooses the costs.
  std::function<double(ModeChooser::Kind kind, double wall_seconds)> step_seconds;
  SpeculativeParams spec;
  // With spec.draft_model: the model that drafts (same vocabulary), with a
  // context of its own whose KV slots mirror the pool's pages.
  std::shared_ptr<Model> draft_model;
};

class Session {
 public:
  // Throws INVALID_ARGUMENT for bad sizes, OUT_OF_MEMORY when the pool cannot be made.
  Session(std::shared_ptr<Model> model, const SessionParams &params);
  ~Session();

  // Returns the new sequence id. Throws INVALID_ARGUMENT, TOKEN_OUT_OF_RANGE, KV_FULL.
  int32_t submit(SequenceRequest request);
  // One round for every active sequence; returns how many are still active.
  int32_t step();
  // Steps until no sequence is active.
  void run();
  // Thread-safe: asks a sequence (or all, with -1) to stop at the next round.
  void cancel(int32_t seq_id);
  // Throws NOT_FOUND.
  const Sequence &sequence(int32_t seq_id) const;
  void release(int32_t seq_id);

  bool in_callback() const { return in_callback_; }
  const Model &model() const { return *model_; }
  const KvPool &kv_pool() const { return kv_.pool(); }
  int32_t active_count() const;
  // nullptr in vanilla mode.
  const SpeculativeDecoder *speculative() const { return spec_.get(); }
  // Vanilla decode steps run inside chains (SessionParams::vanilla_chain).
  int64_t chained_steps() const { return chained_steps_; }

 private:
  // The draft model's context (params_.draft_model), checked against the model.
  void make_draft_context(const ContextParams &target);
  Sequence &find(int32_t seq_id);
  void apply_cancellations();
  void finish(Sequence &seq, vegas_finish_reason reason, vegas_status status);
  // `row`: the logit row `token` was drawn from, whole (vocab logits), or
  // null where only candidates came back; a sequence with req.logprobs
  // always has it.
  void commit_token(Sequence &seq, int32_t token, const float *row);
  void emit(Sequence &seq, int32_t token, const std::string &piece);
  // Offers the sequence's finished full KV pages to the prefix cache.
  void publish(Sequence &seq);
  // After a step: pages the running sequences filled serve later sequences
  // while these still run.
  void publish_running();
  // params_.vanilla_chain vanilla steps of the decoding `seqs` (no prompt
  // rows) in one backend call, committed step by step as separate steps
  // would be (a sequence that stops mid-chain drops the rest). Returns the
  // tokens committed, or -1, having changed nothing a plain step would not
  // redo, where it does not apply (rules without candidates, penalties,
  // logprobs, a sequence one token from max_tokens, no KV room, a backend
  // without chains).
  int64_t chained_vanilla_steps(const std::vector<Sequence *> &seqs);
  // The sequence's next n_tokens rows not yet in the KV cache (from kv_len),
  // with the logits of the last one when it is the newest token.
  static SeqRows pending_rows(Sequence &seq, int32_t n_tokens);
  // What the tuning profile says of the decoding sequences' context and batch.
  ModeChooser::Prior mode_prior(const std::vector<Sequence *> &decoding) const;
  // How the decoding sequences run this step: vanilla rows or a round (of
  // a hybrid policy's own drafter or of its alternate).
  ModeChooser::Kind decode_kind(const std::vector<Sequence *> &decoding);
  // Whether chooser_ picks each decode step's kind: in auto mode, or with a
  // hybrid policy (P+lookup, P+model).
  bool choosing() const;
  // The plan's plain forward pass (its KV reserved): draws and commits each
  // sequence's next token where its last row is the newest. Returns the
  // tokens committed.
  int64_t forward_step(const StepPlan &plan);
  // forward_step's phases: the plan's rows as a batch (a prompt's last chunk
  // captures the scores the first selection needs); the pass and each
  // sequence's draw (on the device where the backend can); the commits.
  struct ForwardDraws {
    std::vector<int64_t> logit_row;  // per plan sequence: its row of the logits, or -1
    std::vector<int32_t> token;      // per plan sequence: its drawn token, or -1
    const float *logits = nullptr;   // null when drawn on the device
    double seconds = 0.0;            // the pass, from the step's start
  };
  ForwardBatch forward_batch(const StepPlan &plan);
  ForwardDraws forward_and_draw(const std::vector<Sequence *> &ready, const ForwardBatch &batch,
                                std::chrono::steady_clock::time_point t0);
  int64_t commit_forward(const StepPlan &plan, const ForwardBatch &batch, const ForwardDraws &d);
  // A draft model prefills the prompt rows the model just ran (SpeculativeDecoder::follow_prefill).
  void follow_prefill(const std::vector<Sequence *> &ready, const ForwardBatch &batch);
  // A speculative round of the decoding `seqs`: plan, reserve, run, apply
  // the outcomes (RNG, statistics, commits, settling), drafted by a hybrid
  // policy's alternate drafter where `alternate`. Returns the tokens
  // committed.
  int64_t speculative_round(const std::vector<Sequence *> &seqs, bool alternate);
  // Commits an outcome's tokens until its sequence finishes, then settles
  // its KV if it still runs. Returns the tokens committed (o.committed).
  int64_t commit_outcome(RoundOutcome &o);
  // The one writer of SequenceStats' gamma, ratio and switches: a copy of
  // the decoder's tuning of `seq`, taken when it starts and after each round.
  void record_tuning(Sequence &seq);

  std::shared_ptr<Model> model_;
  SessionParams params_;
  SequenceKv kv_;            // the one writer of the sequences' KV state
  StepScheduler scheduler_;  // the one decider of its reservations and roll-backs
  std::unique_ptr<BackendContext> context_;
  std::unique_ptr<BackendContext> draft_context_;  // params_.draft_model's
  std::unique_ptr<SpeculativeDecoder> spec_;
  ModeChooser chooser_;  // choosing()
  std::map<int32_t, std::unique_ptr<Sequence>> sequences_;
  std::atomic<int32_t> next_id_{0};
  bool in_callback_ = false;
  bool in_step_ = false;
  int64_t chained_steps_ = 0;

  std::mutex cancel_mutex_;  // guards pending_cancels_
  // {id or -1, next_id_ when asked}: -1 cancels the sequences submitted
  // before the call, not ones submitted while the request waits for a step.
  std::vector<std::pair<int32_t, int32_t>> pending_cancels_;
  std::atomic<bool> has_pending_cancels_{false};

  // Reused per step.
};

}  // namespace vegas
