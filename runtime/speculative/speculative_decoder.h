// The draft → verify → accept → select loop of Vegas (DESIGN §3, §5, §6) for the
// decoding sequences of one session. Drafting runs the model γ times on one
// token per sequence with attention restricted to the sequence's selected KV
// positions (plus every position after the selection point); verification runs
// γ+1 rows per sequence with full attention and also returns the attention
// scores of the rows the policy needs, from which the next selection is made.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "sampling/sampling.h"
#include "sampling/speculative_accept.h"
#include "select/select_policy.h"
#include "session/sequence.h"
#include "speculative/auto_tuning.h"
#include "speculative/draft_tree.h"
#include "speculative/drafter.h"
#include "speculative/lookup_drafter.h"
#include "speculative/model_drafter.h"
#include "speculative/prompt_lookup.h"
#include "speculative/round_work.h"
#include "speculative/tree_accept.h"

namespace vegas {

struct RoundState;

struct SpeculativeParams {
  std::string policy = "vegas";
  int32_t gamma = 6;
  SelectionOptions selection;
  // Branching drafts (draft_tree.h): a round drafts and verifies a tree of up
  // to max_tree_nodes(tree, γ) nodes. The default is the chain.
  DraftTreeShape tree;
  // A separate draft model (same vocabulary) drafts instead of the target's
  // sparse passes (use_draft_model gives its context); no selection is made.
  // draft_window > 0: its draft passes attend to the first `selection.sink`
  // positions and the last draft_window ones (LongSpec's sliding window).
  bool draft_model = false;
  int32_t draft_window = 0;
  // CPU threads a host-side selection may use (the session sets the model's).
  int32_t host_threads = 1;
  // Automatic knobs (the ABI's gamma 0, ratio 0, policy "auto"): they start
  // from `profile` (null: the built-in table) and γ and the ratio are refined
  // per sequence at run time with `refinement`'s constants (auto_tuning.h).
  // The fields above then only hold the knobs that are not automatic.
  AutoKnobs autos;
  std::shared_ptr<const TuningProfile> profile;
  RefinementConfig refinement;
  // Test only (not reachable from the C ABI): draw the token after a rejection
  // from p instead of norm(max(0, p - q)), a lossy rule the statistical tests
  // must detect.
  bool debug_broken_residual = false;
  // Test only: accept on the host even where the backend could on the device
  // (BackendContext::begin_accept), to compare the two.
  bool debug_host_acceptance = false;
  // Test only: rewrites the measured seconds of each round before the tuning
  // sees them (a fixed cost model, so that the load of a shared machine cannot
  // change the decisions a test checks).
  std::function<void(RoundObservation &)> debug_round_costs;
};

// Session-wide counters (vegas_session_stats).
struct SpeculativeTotals {
  int64_t rounds = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  int64_t committed = 0;
  std::vector<int64_t> accepted_at;  // [gamma]: rounds whose draft i was accepted
  std::vector<int64_t> drafted_at;   // [gamma]: rounds that drafted position i
  int32_t longest_gamma = 0;         // the most drafts any round made
  double draft_seconds = 0.0;
  double verify_seconds = 0.0;
  double select_seconds = 0.0;
  int64_t selections = 0;  // sequences' rounds that selected for the next sparse drafts
};

// One sequence's share of a round as planned before it (SpeculativeDecoder::
// plan): its drafts, and the KV positions the scheduler reserves for it.
struct RoundSeq {
  Sequence *seq = nullptr;
  int32_t gamma = 0;  // drafts this round (0: verification only)
  // Positions [0, reserve) need pages: the newest token and every draft
  // (counted before a sequence without a selection drops its drafts).
  int64_t reserve = 0;
  // A round drafted as one chain on the device drafts its longest γ for every
  // sequence: [0, chain_reserve) then need pages, and chain_room says whether
  // the scheduler could reserve them (else the round drafts pass by pass).
  int64_t chain_reserve = 0;
  bool chain_room = false;
  // A tree round: [0, tree_reserve) hold the whole tree, and tree_room says
  // whether the scheduler could reserve them (else the sequence drafts a chain).
  int64_t tree_reserve = 0;
  bool tree_room = false;
  // A lookup round of few sequences drafts up to lookup_gamma (plan()):
  // [0, lookup_reserve) then need pages, and lookup_room says whether the
  // scheduler could reserve them (else it drafts `gamma`).
  int32_t lookup_gamma = 0;
  int64_t lookup_reserve = 0;
  bool lookup_room = false;
};

// What a round did to one sequence, for the caller to apply (the decoder
// writes no Sequence): set its RNG counter to `rng_counter` and count the
// round (`drafted`, `accepted`), whatever happens to its tokens; commit
// `tokens` in order, stopping where the sequence finishes; if it still runs,
// settle its KV at `kv_len` (the rejected drafts' positions rolled back);
// count the commits in `committed`; then end_round().
struct RoundOutcome {
  Sequence *seq = nullptr;
  std::vector<int32_t> tokens;      // accepted drafts, then the correction or bonus token
  std::vector<const float *> rows;  // each token's whole logit row, or null (candidates)
  int32_t kv_len = 0;
  // The sequence's Rng counter after every draw of the round (its drafts,
  // the acceptance's tests, the correction or bonus token), committed or not.
  uint64_t rng_counter = 0;
  int32_t drafted = 0;   // drafts verified this round (0 where they were dropped)
  int32_t accepted = 0;  // of them, those kept
  int32_t committed = 0;
};

// Private base DraftPasses: the draft passes the drafters run (drafter.h).
class SpeculativeDecoder final : private DraftPasses {
 public:
  SpeculativeDecoder(const ModelConfig &config, const SpeculativeParams &params,
                     int32_t max_context);
  ~SpeculativeDecoder();

  // params().policy is the session's policy ("auto" resolved).
  const SpeculativeParams &params() const { return params_; }
  const AutoTuning &tuning() const { return tuning_; }
  // The longest γ a sequence may use (a verify pass has up to max_gamma + 1
  // rows per sequence).
  int32_t max_gamma() const { return tuning_.max_gamma(); }
  // The most verify rows one sequence may have in a round: max_gamma() + 1,
  // or a whole tree's nodes.
  int32_t max_verify_rows() const;
  // Whether rounds draft trees (the backend must have token_trees()).
  bool trees() const { return !params_.tree.chain(); }
  // A hybrid policy (P+lookup, P+model): each round drafts by P's sparse
  // passes or by the alternate drafter, as round() is told.
  bool hybrid() const { return alternate_.has_value(); }
  // vegas_session_stats.gamma: the fixed γ, or with γ auto the longest used.
  int32_t reported_gamma() const {
    return params_.autos.gamma ? totals_.longest_gamma : params_.gamma;
  }
  const SpeculativeTotals &totals() const { return totals_; }
  const SelectionPolicy &policy() const { return *policy_; }
  // The sequence's tuning now (its γ, ratio and switches, SequenceStats'
  // copy of them), or null before its first prefill capture and after forget.
  const SequenceTuning *sequence_tuning(int32_t seq_id) const;

  // Selects on the device when the backend can and the policy has a device
  // form (DevicePlan); call once, after the backend context exists. Returns
  // whether device selection is on.
  bool use_device_selection(bool backend_supports);
  bool device_selection() const { return device_; }
  // params().draft_model: the draft model's context (KV slots at the target's
  // page tables' pages, its own storage), which rounds draft with. Kept, not owned.
  // `max_rows`: the most rows one of its forward calls may carry; `n_layers`:
  // the draft model's (its window sets have one entry per layer).
  // `n_heads`: the draft's query heads (P@model maps its scores to the model's).
  void use_draft_context(BackendContext *draft, int32_t max_rows, int32_t n_layers,
                         int32_t n_heads);

  // Adds score capture of the last prompt row to a prefill chunk that ends the
  // prompt of `seq`; call select_after_prefill once the forward pass ran.
  // `batch`: the sequences decoding with it (picks its tuning profile bucket).
  void prepare_prefill_capture(const Sequence &seq, SeqRows &rows, int32_t batch = 1);
  void select_after_prefill(const Sequence &seq);
  // With a draft model: the draft prefills what the model just prefilled of
  // each sequence's prompt (`prompt_rows`, rows of the model's pass), so that
  // a round does not wait for it. Other rows are caught up in rounds.
  void follow_prefill(const std::vector<const Sequence *> &seqs,
                      const std::vector<SeqRows> &prompt_rows);

  // A round of the decoding `seqs` (prompt in the KV cache, newest token
  // pending): each one's drafts and the KV to reserve for them. Reads the
  // sequences and prepares their drafting state; reserves nothing. Throws
  // INVALID_ARGUMENT where a query-aware policy scores pages of another size
  // than the pool's `page_size`.
  // `alternate` and `select` as round() will be told: a round that drafts by
  // prompt lookup and captures no scores for every verify row may draft more
  // than γ (RoundSeq::lookup_gamma, set_wide_lookup_rows).
  std::vector<RoundSeq> plan(const std::vector<Sequence *> &seqs, int32_t page_size,
                             bool alternate = false, bool select = true);
  // The rows a lookup round of few sequences may total with drafts past γ
  // (RoundSeq::lookup_gamma): the rows the session's passes take at about a
  // one-row pass's cost (BackendContext::cheap_pass_rows), within the most
  // they carry. 0 (the default): lookup rounds draft γ.
  void set_wide_lookup_rows(int32_t rows) { wide_lookup_rows_ = rows; }
  // Runs the planned round (every `reserve` held, `chain_room` as reserved):
  // draft (by a hybrid's alternate drafter where `alternate`), verify, accept;
  // unless `select`, the round makes no selection (a hybrid's alternate
  // round: the sparse passes keep their last one, whose selection point
  // leaves every later position in their sets). Writes no sequence
  // (no KV state, no RNG, no statistics, no token): the caller applies the outcomes (RoundOutcome),
  // then calls end_round. The rows they point to stay valid until the
  // context's next pass.
  std::vector<RoundOutcome> round(const std::vector<RoundSeq> &seqs, BackendContext &context,
                                  bool alternate = false, bool select = true);
  // After the outcomes were applied: the session-wide totals, each
  // still-running sequence's tuning (sequence_tuning) and its next selection.
  void end_round(const std::vector<RoundOutcome> &outcomes, BackendContext &context);

  // The sequence ended: drop its state.
  void forget(int32_t seq_id);

 private:
  // The constructor's parts: the drafters the policy names (own_,
  // alternate_, draft_selects_; the combinations checked), returning P, the
  // sparse policy's name; then policy_ for it and what it needs.
  std::string choose_drafters();
  void make_policy(const std::string &base, int32_t max_context);

  // The phases of round(), in order. RoundState (round_state.h) is what
  // they share: the passes' candidates or rows, the chain, the device's
  // acceptance records, each sequence's first verify row.
  // Each planned sequence's share of the round.
  std::vector<RoundWork> round_work(const std::vector<RoundSeq> &seqs);
  // The drafter of kind k (INTERNAL where a draft model's was never given).
  Drafter &drafter(DrafterKind k);
  // P@model (draft_selection.cpp): each sequence's draft KV caught up with
  // the scores of its newest row captured, mapped to the model's layers and
  // heads, and the policy's sets selected from them.
  void select_from_draft(std::vector<RoundWork> &work);

  // DraftPasses, for the drafters. The drafts one pass at a time, drawn on
  // the host (no chain on the device).
  void pass_by_pass(std::vector<RoundWork> &work, int32_t max_gamma, BackendContext &context,
                    RoundState &rs) override;
  // INVALID_ARGUMENT for a tree shape out of bounds or a policy that cannot
  // draft trees.
  void check_tree_shape() const;
  // A tree round's draft passes (speculative_tree_round.cpp): pass j runs
  // level j of every sequence's tree and draws level j + 1.
  void tree_levels(std::vector<RoundWork> &work, int32_t max_gamma, BackendContext &context,
                   RoundState &rs) override;
  // Level j + 1 of w's tree from the rows of level j (its candidates or logits).
  void grow_tree_level(RoundWork &w, int32_t level, RoundState &rs, const float *logits,
                       size_t first_row);
  // The tree acceptance of one sequence, its rows from `base` on.
  void accept_tree(RoundWork &w, RoundState &rs, int64_t base, AcceptResult *result);
  // Moves each tree's accepted path into the slots of its positions.
  void compact_trees(const std::vector<RoundWork> &work, BackendContext &context);
  // The penalties' history of a tree node: the sequence's tokens, then the
  // drafts on the path to the node.
  static void tree_history(const RoundWork &w, int32_t node, std::vector<int32_t> *out);
  // plan(): the wide γ of a lookup round's sequences (RoundSeq::lookup_gamma).
  void plan_wide_lookup(std::vector<RoundSeq> &planned, bool alternate, bool select) const;
  // The draft positions the totals count: max_gamma(), or a wide lookup γ.
  int32_t stats_gamma() const;
  // The verify pass's rows, with the scores the policy reads captured where
  // `select`.
  ForwardBatch verify_batch(std::vector<RoundWork> &work, RoundState &rs, bool select);
  // Runs the verify pass; behind a chain, `drafts_read` is called once its
  // draws are read (while the pass runs), and the device accepts where it can.
  void run_verify(std::vector<RoundWork> &work, const ForwardBatch &verify, BackendContext &context,
                  RoundState &rs, const std::function<void()> &drafts_read);
  void accept_round(std::vector<RoundWork> &work, RoundState &rs,
                    std::vector<AcceptResult> *results);
  // Each sequence's tokens, their rows, its settled KV length, RNG counter,
  // drafts and acceptances (`work` holds one entry per `seqs`, in order);
  // counts the drafts and acceptances in totals_.
  std::vector<RoundOutcome> outcomes(const std::vector<RoundSeq> &seqs,
                                     const std::vector<RoundWork> &work,
                                     const std::vector<AcceptResult> &results,
                                     const RoundState &rs);

  // Whether passes on `context` are the draft model's (its own KV, no selection).
  bool drafts_on_model(const BackendContext &context) const {
    return model_drafter_ && &context == &model_drafter_->context();
  }
  // Draft pass j's row of a sequence, on *token, for passes on the draft
  // model's context (`model_rows`: its window, or every position) or the
  // model's own (the sequence's selection).
  SeqRows draft_row(const RoundWork &w, int32_t j, const int32_t *token, bool model_rows) const;
  // Every drafting sequence with a rule without penalties on a
  // device-selected set: the round's max_gamma passes enqueued in one backend
  // call, each fed the previous pass's draws on the device. A sequence with a
  // shorter gamma (its last tokens) drafts max_gamma too, into slots reserved
  // for them, and its extra drafts are dropped. False when nothing was begun
  // (the caller drafts pass by pass); else the verify pass follows with the
  // draws fed on the device (chain_feed), and finish_chain reads them.
  bool begin_chain(std::vector<RoundWork> &work, int32_t max_gamma, BackendContext &context,
                   ChainedDrafts *chain) override;
  // Empties a chain that was not begun, its sequences no longer chained.
  void abandon_chain(ChainedDrafts *chain) override;
  // Per token row of the verification of `work`: the chain draw it takes, or -1.
  static std::vector<int32_t> chain_feed(const std::vector<RoundWork> &work,
                                         const ChainedDrafts &chain);
  // Waits for the chain and fills each sequence's drafts; false when the
  // backend lost their candidates (then no q can be built for them).
  bool finish_chain(ChainedDrafts &chain, BackendContext &context) override;
  // Each chained draft's q from the chain's candidates, checking that the
  // device's token lies in it, and the sampled sequences' RNG cursors
  // (RoundWork::rng) advanced past their draws. Runs while the verify pass does.
  void build_chained_q(ChainedDrafts &chain) override;
  // build_chained_q for the chain's sequence i.
  void build_chained_q_of(ChainedDrafts &chain, size_t i);
  // Per sequence of `work` (verify rows in order): what the device needs to
  // accept its drafts behind the verify pass.
  static std::vector<BackendContext::AcceptOnDevice> device_accept_specs(
      const std::vector<RoundWork> &work, const std::vector<int64_t> &row_base);
  // The device's acceptance of `w` into *result, its RNG cursor advanced past
  // the chain's and the acceptance's draws; false when the device handed it
  // back, with its q then built for the host's acceptance.
  bool take_device_acceptance(RoundWork &w, const BackendContext::AcceptedOnDevice &a,
                              ChainedDrafts &chain, AcceptResult *result);
  // When the chain's candidates were lost: each chained sequence keeps its
  // verification rows but drops its drafts (gamma 0 from here on), its RNG
  // cursor past the chain's draws.
  void drop_chained_drafts(ChainedDrafts &chain) override;

  // The sequence's state, its tuning started (for `batch` sequences) on first use.
  SpeculativeSeqState &state(const Sequence &seq, int32_t batch = 1);
  static BudgetKnobs knobs(const SpeculativeSeqState &st) {
    return {st.tuning.ratio, st.tuning.window_share};
  }
  // Feeds a finished round of the sequence to its tuning.
  void observe_round(int32_t seq_id, SpeculativeSeqState &st, RoundObservation obs);
  void setup_capture(SpeculativeSeqState &st, int32_t n_candidates,
                     const std::vector<int32_t> &rows);
  // Device mode: captures `rows` for a selection over n candidates made on the device.
  void setup_device_select(SpeculativeSeqState &st, int32_t seq_id, int32_t n_candidates,
                           const std::vector<int32_t> &rows, SeqRows &r);
  // Runs the policy for every layer over the captured scores.
  void select(const Sequence &seq, SpeculativeSeqState &st, int32_t n_candidates,
              int32_t last_accepted_row);

  const ModelConfig &config_;
  SpeculativeParams params_;
  AutoTuning tuning_;
  std::unique_ptr<SelectionPolicy> policy_;
  std::map<int32_t, SpeculativeSeqState> states_;
  bool device_ = false;
  // The policy selects inside every draft pass from the draft query (quest).
  bool query_aware_ = false;
  // Who drafts a round. own_: the policy's sparse passes; kLookup for the
  // policy "lookup" (drafts from the context, no draft pass) and kModel for a
  // draft model without a hybrid (params().draft_model), both with policy_
  // "full", which selects nothing. alternate_ (policy "P+lookup" or "P+model"):
  // the other drafter of a hybrid, which drafts the rounds the session's
  // ModeChooser gives it (kAlternate: whichever has committed more tokens per
  // second in this batch bucket, the other probed now and then); P selects
  // after its own rounds, and after the alternate's while P leads.
  DrafterKind own_ = DrafterKind::kSparse;
  std::optional<DrafterKind> alternate_;
  bool drafts_by(DrafterKind k) const { return own_ == k || alternate_ == k; }
  // Who drafts a round that round() (or plan()) is told is `alternate` or not.
  DrafterKind round_drafter(bool alternate) const {
    return alternate && alternate_ ? *alternate_ : own_;
  }
  // [kind]: the drafters of own_ and alternate_, the others null; a draft
  // model's from use_draft_context on (model_drafter_ is it, for its rows).
  std::unique_ptr<Drafter> drafters_[kDrafterKinds];
  ModelDrafter *model_drafter_ = nullptr;
  // P@model (SpecAttn): the sparse passes' sets come from the draft model's
  // attention at the start of each round, not from the verify pass's scores.
  bool draft_selects_ = false;
  int32_t draft_heads_ = 0;       // the draft model's query heads
  int32_t wide_lookup_rows_ = 0;  // set_wide_lookup_rows
  SpeculativeTotals totals_;
  // Between round() and end_round(): what the round's end needs.
  struct PendingRound;
  std::unique_ptr<PendingRound> pending_;
};

}  // namespace vegas
