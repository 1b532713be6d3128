#include "speculative/speculative_decoder.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/parallel_rows.h"
#include "sampling/speculative_accept.h"
#include "session/sequence_rows.h"
#include "speculative/prompt_lookup.h"
#include "speculative/round_state.h"

namespace vegas {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// VEGAS_ROUND_TRACE=1: one stderr line per round with its host sections (ms):
// `between` is the time since the previous round ended (the session's own
// work: commits were counted in the round, so mostly scheduling), then the
// round's preparation, the draft and verify calls (device time inside), the
// acceptance, the commits and the selection that follows them.
class RoundTrace {
 public:
  RoundTrace() {
    static const bool on = [] {
      const char *env = std::getenv("VEGAS_ROUND_TRACE");
      return env != nullptr && env[0] == '1';
    }();
    on_ = on;
    if (on_) mark("between", last_end());
  }
  void mark(const char *what) {
    if (on_) mark(what, t_);
  }
  // `drafter`: how the round drafted ("sparse" passes or prompt "lookup");
  // `committed`: the tokens the round gave its sequences.
  void finish(size_t n_seqs, int32_t max_gamma, const char *drafter, int64_t committed) {
    if (!on_) return;
    std::string line = "[vegas-round] seqs " + std::to_string(n_seqs) + " gamma " +
                       std::to_string(max_gamma) + " drafter " + drafter + " committed " +
                       std::to_string(committed);
    double total = 0.0;
    for (const auto &[what, ms] : sections_) {
      char buf[64];
      std::snprintf(buf, sizeof buf, " %s %.3f", what, ms);
      line += buf;
      if (std::string(what) != "between") total += ms;
    }
    std::fprintf(stderr, "%s round %.3f ms\n", line.c_str(), total);
    last_end() = now_seconds();
  }

 private:
  static double &last_end() {
    static double t = 0.0;
    return t;
  }
  void mark(const char *what, double since) {
    const double now = now_seconds();
    sections_.emplace_back(what, since > 0.0 ? (now - since) * 1e3 : 0.0);
    t_ = now;
  }
  bool on_ = false;
  double t_ = 0.0;
  std::vector<std::pair<const char *, double>> sections_;
};

// The history the logit rules see for a row: the sequence's tokens, then the
// drafts before that row. Only built when penalties need it.
void build_history(const Sequence &seq, const std::vector<int32_t> &drafts, int32_t n_drafts,
                   std::vector<int32_t> *out) {
  out->clear();
  if (!seq.req.sampling.has_penalties()) return;
  out->assign(seq.tokens.begin(), seq.tokens.end());
  out->insert(out->end(), drafts.begin(), drafts.begin() + n_drafts);
}

// The verify rows (0..gamma) whose scores the policy reads.
std::vector<int32_t> verify_capture_rows(ScoreRows score_rows, int32_t gamma) {
  std::vector<int32_t> rows;
  if (score_rows == ScoreRows::kAll) {
    for (int32_t k = 0; k <= gamma; ++k) rows.push_back(k);
  } else if (score_rows == ScoreRows::kFirstLast) {
    rows.push_back(0);
    if (gamma > 0) rows.push_back(gamma);
  }
  return rows;
}

FixedKnobs fixed_knobs(const SpeculativeParams &p) {
  FixedKnobs f;
  f.policy = p.policy;
  f.gamma = p.gamma;
  f.ratio = p.selection.ratio;
  f.window_share = p.selection.window_share;
  f.min_tokens = p.selection.min_tokens;
  f.draft_model = p.draft_model;
  return f;
}

}  // namespace

// Rows built from picked candidates cost ~0.3 us each: threads pay only from
// this many sequences on (a round of 64 builds ~830 distributions; at 16 the
// team's wake-up cost more than the rows on the 2-core machine that measured it).
// VEGAS_ROUND_THREAD_SEQS=N sets another threshold (A/B on other machines).
size_t threaded_round_seqs() {
  static const size_t n = [] {
    const char *env = std::getenv("VEGAS_ROUND_THREAD_SEQS");
    const long v = env != nullptr ? std::atol(env) : 0;
    return v >= 1 ? static_cast<size_t>(v) : size_t{32};
  }();
  return n;
}

SpeculativeDecoder::SpeculativeDecoder(const ModelConfig &config, const SpeculativeParams &params,
                                       int32_t max_context)
    : config_(config),
      params_(params),
      tuning_(params.autos, fixed_knobs(params), params.profile, params.refinement) {
  if (!params_.autos.gamma && (params_.gamma < 1 || params_.gamma > 32))
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "gamma " + std::to_string(params_.gamma) + " must be in [1, 32] (0 = auto)");
  // Auto knobs resolved: the policy is built with the session's ratio and
  // window share, and each sequence passes its own (BudgetKnobs).
  params_.policy = tuning_.policy();
  params_.selection.ratio = tuning_.session_ratio();
  params_.selection.window_share = tuning_.session_window_share();
  if (params_.draft_window < 0)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "draft_window " + std::to_string(params_.draft_window) + " < 0 (0 = no window)");
  make_policy(choose_drafters(), max_context);
  check_tree_shape();
  if (own_ == DrafterKind::kSparse)
    drafters_[drafter_index(DrafterKind::kSparse)] = std::make_unique<SparseDrafter>(trees());
  if (drafts_by(DrafterKind::kLookup))
    drafters_[drafter_index(DrafterKind::kLookup)] = std::make_unique<LookupDrafter>();
  totals_.accepted_at.assign(static_cast<size_t>(stats_gamma()), 0);
  totals_.drafted_at.assign(static_cast<size_t>(stats_gamma()), 0);
}

std::string SpeculativeDecoder::choose_drafters() {
  // P+lookup and P+model: P's sparse passes and an alternate drafter.
  // P@model: P's sparse passes on sets the draft model's attention picks.
  std::string base = lookup_hybrid_base(params_.policy);
  const std::string model_base = model_hybrid_base(params_.policy);
  const std::string selected_base = draft_selected_base(params_.policy);
  if (!model_base.empty()) {
    base = model_base;
    alternate_ = DrafterKind::kModel;
  } else if (!base.empty()) {
    alternate_ = DrafterKind::kLookup;
  } else if (!selected_base.empty()) {
    base = selected_base;
    draft_selects_ = true;
  } else {
    base = params_.policy;
  }
  if (draft_selects_ && (base == "lookup" || base == "model" || !params_.draft_model))
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "policy '" + params_.policy +
             "' needs a sparse policy before the '@' and a draft model (draft_model)");
  if (alternate_ && (base == "lookup" || base == "model"))
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "policy '" + params_.policy + "': the hybrid needs a sparse policy before the '+'");
  if (alternate_ == DrafterKind::kModel && !params_.draft_model)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "policy '" + params_.policy + "' needs a draft model (draft_model)");
  // A draft model drafts every round, or (P+model) the rounds the chooser gives it.
  if (base == "lookup")
    own_ = DrafterKind::kLookup;
  else if (params_.draft_model && alternate_ != DrafterKind::kModel && !draft_selects_)
    own_ = DrafterKind::kModel;
  if (params_.draft_model && drafts_by(DrafterKind::kLookup))
    fail(VEGAS_ERR_INVALID_ARGUMENT, "policy '" + params_.policy +
                                         "' drafts by prompt lookup; a session with a draft "
                                         "model drafts with the model (or P+model)");
  return base;
}

void SpeculativeDecoder::make_policy(const std::string &base, int32_t max_context) {
  SelectionShape shape;
  shape.max_candidates = std::max(max_context, 1);
  shape.max_rows = tuning_.max_gamma() + 1;
  shape.n_heads = config_.n_heads;
  shape.n_kv_heads = config_.n_kv_heads;
  shape.head_dim = config_.head_dim;
  // Lookup and a draft model select nothing: policy "full" (no scores, no set).
  policy_ =
      make_selection_policy(own_ != DrafterKind::kSparse ? "full" : base, params_.selection, shape);
  const SelectionNeeds needs = policy_->needs();
  QueryAwarePlan plan;
  query_aware_ = needs.every_draft_step && policy_->query_aware_plan(1, &plan);
  if ((needs.page_bounds || needs.every_draft_step) && !query_aware_)
    fail(VEGAS_ERR_NOT_BUILT, "policy '" + params_.policy +
                                  "' selects every draft step but has no query-aware form "
                                  "for the backends' draft passes");
  if (draft_selects_ && (needs.score_rows == ScoreRows::kNone || query_aware_))
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "policy '" + params_.policy +
             "': a draft model's scores pick the sets of a policy that selects from attention "
             "scores once a round (not full, nor quest)");
}

SpeculativeDecoder::~SpeculativeDecoder() = default;

void SpeculativeDecoder::use_draft_context(BackendContext *draft, int32_t max_rows,
                                           int32_t n_layers, int32_t n_heads) {
  auto model = std::make_unique<ModelDrafter>(*draft, max_rows, n_layers, params_.draft_window,
                                              params_.selection.sink);
  draft_heads_ = n_heads;
  model_drafter_ = model.get();
  drafters_[drafter_index(DrafterKind::kModel)] = std::move(model);
}

Drafter &SpeculativeDecoder::drafter(DrafterKind k) {
  Drafter *d = drafters_[drafter_index(k)].get();
  if (d == nullptr)
    fail(VEGAS_ERR_INTERNAL, std::string("a round drafted by the ") + drafter_name(k) +
                                 " drafter, which this session has not got (a draft model's "
                                 "needs its context)");
  return *d;
}

void SpeculativeDecoder::follow_prefill(const std::vector<const Sequence *> &seqs,
                                        const std::vector<SeqRows> &prompt_rows) {
  for (const std::unique_ptr<Drafter> &d : drafters_)
    if (d) d->follow_prefill(seqs, prompt_rows);
}

bool SpeculativeDecoder::use_device_selection(bool backend_supports) {
  DevicePlan plan;
  // P@model selects on the host, from the draft model's scores.
  device_ = own_ == DrafterKind::kSparse && !draft_selects_ && backend_supports &&
            policy_->device_plan(1, &plan);
  return device_;
}

void SpeculativeDecoder::setup_device_select(SpeculativeSeqState &st, int32_t seq_id,
                                             int32_t n_candidates, const std::vector<int32_t> &rows,
                                             SeqRows &r) {
  DevicePlan plan;
  policy_->device_plan(n_candidates, knobs(st), &plan);
  st.capture_rows = plan.scored > 0 ? rows : std::vector<int32_t>{};
  st.capture.n_candidates = n_candidates;
  st.capture.rows = st.capture_rows.data();
  st.capture.n_rows = static_cast<int32_t>(st.capture_rows.size());
  st.capture.logits = nullptr;  // the scores stay on the device
  st.capture.lse = nullptr;
  st.device_select.key = seq_id;
  st.device_select.head = plan.head;
  st.device_select.tail = plan.tail;
  st.device_select.scored = plan.scored;
  st.device_select.weight = plan.weight;
  // After prefill there is one row, so nothing is left to choose.
  st.device_select.deferred = plan.last_accepted && st.capture.n_rows > 1;
  r.capture = &st.capture;
  r.device_select = &st.device_select;
}

SpeculativeSeqState &SpeculativeDecoder::state(const Sequence &seq, int32_t batch) {
  SpeculativeSeqState &st = states_[seq.id];
  if (!st.tuned) {
    st.tuning = tuning_.start(seq.n_prompt(), batch);
    st.tuned = true;
  }
  return st;
}

const SequenceTuning *SpeculativeDecoder::sequence_tuning(int32_t seq_id) const {
  const auto it = states_.find(seq_id);
  return it != states_.end() && it->second.tuned ? &it->second.tuning : nullptr;
}

void SpeculativeDecoder::observe_round(int32_t seq_id, SpeculativeSeqState &st,
                                       RoundObservation obs) {
  if (params_.debug_round_costs) params_.debug_round_costs(obs);
  tuning_.observe(seq_id, st.tuning, obs);
}

void SpeculativeDecoder::forget(int32_t seq_id) {
  for (const std::unique_ptr<Drafter> &d : drafters_)
    if (d) d->forget(seq_id);
  if (states_.erase(seq_id) > 0) policy_->reset(seq_id);
}

void SpeculativeDecoder::setup_capture(SpeculativeSeqState &st, int32_t n_candidates,
                                       const std::vector<int32_t> &rows) {
  const size_t n_rows = rows.size();
  st.capture_rows = rows;
  const size_t per_layer = n_rows * static_cast<size_t>(config_.n_heads);
  st.score_logits.resize(static_cast<size_t>(config_.n_layers) * per_layer *
                         static_cast<size_t>(n_candidates));
  st.score_lse.resize(static_cast<size_t>(config_.n_layers) * per_layer);
  st.capture.n_candidates = n_candidates;
  st.capture.rows = st.capture_rows.data();
  st.capture.n_rows = static_cast<int32_t>(n_rows);
  st.capture.logits = st.score_logits.data();
  st.capture.lse = st.score_lse.data();
}

void SpeculativeDecoder::select(const Sequence &seq, SpeculativeSeqState &st, int32_t n_candidates,
                                int32_t last_accepted_row) {
  const int32_t n_layers = config_.n_layers;
  st.stride = std::max(n_candidates, 1);
  st.positions.resize(static_cast<size_t>(n_layers) * static_cast<size_t>(st.stride));
  st.counts.assign(static_cast<size_t>(n_layers), 0);
  const bool with_scores = policy_->needs().score_rows != ScoreRows::kNone;
  const size_t per_layer = static_cast<size_t>(st.capture.n_rows) * config_.n_heads;
  for (int32_t layer = 0; layer < n_layers; ++layer) {
    SelectInput in;
    in.seq_id = seq.id;
    in.layer = layer;
    in.n_layers = n_layers;
    in.n = n_candidates;
    in.last_accepted_row = last_accepted_row;
    in.knobs = knobs(st);
    in.threads = params_.host_threads;
    if (with_scores) {
      in.scores.logits = st.score_logits.data() + layer * per_layer * n_candidates;
      in.scores.lse = st.score_lse.data() + layer * per_layer;
      in.scores.n_rows = st.capture.n_rows;
      in.scores.stride = n_candidates;
    }
    int32_t *out = st.positions.data() + static_cast<size_t>(layer) * st.stride;
    st.counts[static_cast<size_t>(layer)] = policy_->select(in, out, st.stride);
  }
  st.sparse.prefix = n_candidates;
  st.sparse.positions = st.positions.data();
  st.sparse.counts = st.counts.data();
  st.sparse.stride = st.stride;
  st.has_selection = true;
}

void SpeculativeDecoder::prepare_prefill_capture(const Sequence &seq, SeqRows &rows,
                                                 int32_t batch) {
  for (const std::unique_ptr<Drafter> &d : drafters_)
    if (d) d->begin_prompt(seq);
  SpeculativeSeqState &st = state(seq, batch);
  if (device_) {
    setup_device_select(st, seq.id, rows.start_pos + rows.n_tokens, {rows.n_tokens - 1}, rows);
    return;
  }
  if (policy_->needs().score_rows == ScoreRows::kNone) return;
  setup_capture(st, rows.start_pos + rows.n_tokens, {rows.n_tokens - 1});
  rows.capture = &st.capture;
}

void SpeculativeDecoder::select_after_prefill(const Sequence &seq) {
  const double t0 = now_seconds();
  SpeculativeSeqState &st = state(seq);
  if (device_ || query_aware_) {  // selected by the prefill's forward pass, or by each draft pass
    st.has_selection = true;
    return;
  }
  if (policy_->needs().score_rows == ScoreRows::kNone) st.capture.n_rows = 0;
  select(seq, st, seq.kv_len, 0);
  totals_.select_seconds += now_seconds() - t0;
}

SeqRows SpeculativeDecoder::draft_row(const RoundWork &w, int32_t j, const int32_t *token,
                                      bool model_rows) const {
  SeqRows r = sequence_rows(*w.seq, token, 1, w.seq->kv_len + j, SeqRows::Logits::kLast);
  if (model_rows) {  // the draft model's own KV: every position, or its window
    r.sparse = model_drafter_->window_of(*w.seq);
  } else if (device_) {
    const DeviceSelection &ds = w.st->device_select;
    r.device_sparse_key = w.seq->id;
    r.device_sparse_span =
        ds.head + ds.tail + ds.scored + (r.start_pos + 1 - w.st->capture.n_candidates);
  } else if (query_aware_) {
    r.quest = &w.st->quest;
  } else {
    r.sparse = &w.st->sparse;
  }
  return r;
}

bool SpeculativeDecoder::begin_chain(std::vector<RoundWork> &work, int32_t max_gamma,
                                     BackendContext &context, ChainedDrafts *chain) {
  // The sparse drafts' rows read the device's selection; a draft model's are dense.
  const bool model_rows = drafts_on_model(context);
  if ((!device_ && !model_rows) || max_gamma == 0) return false;
  for (RoundWork &w : work) {
    if (w.gamma == 0) continue;
    // No room for the extra drafts, or penalties: one pass at a time.
    if (w.seq->req.sampling.has_penalties() || !w.chain_room) return false;
    chain->seqs.push_back(&w);
  }
  if (chain->seqs.empty()) return false;
  for (size_t i = 0; i < chain->seqs.size(); ++i)
    chain->seqs[i]->chain_index = static_cast<int32_t>(i);
  const size_t n = chain->seqs.size();
  ForwardBatch first;
  std::vector<RowSampling> rules(n);
  std::vector<int32_t> k(n);
  chain->first_tokens.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const RoundWork &w = *chain->seqs[i];
    chain->first_tokens[i] = w.seq->tokens.back();
    first.seqs.push_back(draft_row(w, 0, &chain->first_tokens[i], model_rows));
    rules[i].params = &w.seq->req.sampling;
    rules[i].rng_counter = w.rng.counter();
    k[i] = w.k;
  }
  chain->tokens.resize(n * static_cast<size_t>(max_gamma));
  if (context.begin_draft_chain(first, max_gamma, rules.data(), k.data())) return true;
  abandon_chain(chain);
  return false;
}

void SpeculativeDecoder::abandon_chain(ChainedDrafts *chain) {
  for (RoundWork *w : chain->seqs) w->chain_index = -1;
  chain->seqs.clear();
}

std::vector<int32_t> SpeculativeDecoder::chain_feed(const std::vector<RoundWork> &work,
                                                    const ChainedDrafts &chain) {
  const int32_t n = static_cast<int32_t>(chain.seqs.size());
  std::vector<int32_t> fed;
  for (const RoundWork &w : work) {
    const int32_t i = w.chain_index;
    fed.push_back(-1);  // row 0: the last committed token, staged by the host
    for (int32_t j = 0; j < w.gamma; ++j) fed.push_back(i < 0 ? -1 : j * n + i);
  }
  return fed;
}

bool SpeculativeDecoder::finish_chain(ChainedDrafts &chain, BackendContext &context) {
  if (!context.end_draft_chain(chain.tokens.data(), &chain.rows)) return false;
  const size_t n = chain.seqs.size();
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < static_cast<size_t>(chain.seqs[i]->gamma); ++j)
      chain.seqs[i]->drafts[j] = chain.tokens[j * n + i];
  return true;
}

void SpeculativeDecoder::build_chained_q_of(ChainedDrafts &chain, size_t i) {
  const size_t n = chain.seqs.size();
  RoundWork &w = *chain.seqs[i];
  const SamplingParams &rule = w.seq->req.sampling;
  for (size_t j = 0; j < static_cast<size_t>(w.gamma); ++j) {
    TokenDistribution &q = w.q[j];
    build_distribution_from_candidates(chain.rows[j * n + i], rule, &q);
    const int32_t token = w.drafts[j];
    // The device drew from this very distribution (kernels::sample is the
    // host's rule bit for bit): a token outside it is a fault, not a draw.
    if (rule.greedy() ? token != q.ids[0] : !(q.prob_of(token) > 0.0f))
      fail(VEGAS_ERR_INTERNAL, "draft pass " + std::to_string(j) + " of sequence " +
                                   std::to_string(w.seq->id) + ": the device drew token " +
                                   std::to_string(token) + ", outside its distribution");
  }
  if (!rule.greedy()) w.rng.skip(w.gamma);
}

void SpeculativeDecoder::build_chained_q(ChainedDrafts &chain) {
  parallel_rows(
      static_cast<int64_t>(chain.seqs.size()),
      [&](int64_t i) { build_chained_q_of(chain, static_cast<size_t>(i)); },
      chain.seqs.size() >= threaded_round_seqs());
}

std::vector<BackendContext::AcceptOnDevice> SpeculativeDecoder::device_accept_specs(
    const std::vector<RoundWork> &work, const std::vector<int64_t> &row_base) {
  std::vector<BackendContext::AcceptOnDevice> specs;
  for (size_t i = 0; i < work.size(); ++i) {
    const RoundWork &w = work[i];
    BackendContext::AcceptOnDevice a;
    a.first_row = static_cast<int32_t>(row_base[i]);
    a.gamma = w.gamma;
    a.chain_row = w.chain_index;
    a.params = &w.seq->req.sampling;
    // The chain drew the drafts from the counter on (build_chained_q_of's advance).
    a.rng_counter = w.rng.counter() + (a.params->greedy() ? 0 : w.gamma);
    specs.push_back(a);
  }
  return specs;
}

bool SpeculativeDecoder::take_device_acceptance(RoundWork &w,
                                                const BackendContext::AcceptedOnDevice &a,
                                                ChainedDrafts &chain, AcceptResult *result) {
  if (!a.ok) {  // the host accepts it from the chain's candidates
    if (w.chain_index >= 0) build_chained_q_of(chain, static_cast<size_t>(w.chain_index));
    return false;
  }
  if (a.n_accepted < 0 || a.n_accepted > w.gamma ||
      a.tokens.size() != static_cast<size_t>(a.n_accepted) + 1 ||
      !std::equal(a.tokens.begin(), a.tokens.begin() + a.n_accepted, w.drafts.begin()))
    fail(VEGAS_ERR_INTERNAL, "device acceptance of sequence " + std::to_string(w.seq->id) +
                                 ": its kept tokens are not its drafts");
  result->n_accepted = a.n_accepted;
  result->tokens = a.tokens;
  // Past the chain's draws (build_chained_q_of's advance) and the acceptance's.
  if (!w.seq->req.sampling.greedy()) w.rng.skip(static_cast<uint64_t>(w.gamma) + a.draws);
  return true;
}

void SpeculativeDecoder::drop_chained_drafts(ChainedDrafts &chain) {
  // Their draws were fed to the verify pass, whose rows stay as they are; the
  // sequence commits verify row 0's token alone (plain decoding, so exact),
  // and its RNG cursor skips the chain's draws.
  for (RoundWork *w : chain.seqs) {
    if (!w->seq->req.sampling.greedy()) w->rng.skip(w->gamma);
    w->gamma = 0;
    w->drafts.clear();
    w->q.clear();
  }
}

std::vector<RoundSeq> SpeculativeDecoder::plan(const std::vector<Sequence *> &seqs,
                                               int32_t page_size, bool alternate, bool select) {
  std::vector<RoundSeq> planned;
  int32_t max_gamma = 0;
  for (Sequence *seq : seqs) {
    SpeculativeSeqState &st = state(*seq);
    RoundSeq r;
    r.seq = seq;
    // How many drafts this round (never more than max_tokens allows).
    const int32_t remaining = seq->req.max_tokens - seq->n_generated();
    r.gamma = std::max(0, std::min(st.tuning.gamma, remaining - 1));
    r.reserve = int64_t{seq->kv_len} + r.gamma + 1;
    if (!st.has_selection) r.gamma = 0;  // nothing selected yet: verify only
    max_gamma = std::max(max_gamma, r.gamma);
    if (query_aware_) {  // the draft passes select from [0, kv_len), the committed tokens
      QueryAwarePlan qp;
      policy_->query_aware_plan(seq->kv_len, knobs(st), &qp);
      if (qp.page_size != page_size)
        fail(VEGAS_ERR_INVALID_ARGUMENT,
             "policy '" + params_.policy + "' scores pages of " + std::to_string(qp.page_size) +
                 " tokens, but draft passes score the KV pages of " + std::to_string(page_size));
      st.quest.prefix = seq->kv_len;
      st.quest.budget = qp.budget;
    }
    planned.push_back(r);
  }
  plan_wide_lookup(planned, alternate, select);
  // A tree round reserves the tree where it fits.
  for (RoundSeq &r : planned)
    r.tree_reserve =
        trees() && r.gamma > 0
            ? std::max(r.reserve, int64_t{r.seq->kv_len} + max_tree_nodes(params_.tree, r.gamma))
            : r.reserve;
  // Only a chained round (device selection or a drafting draft model, no
  // penalties) drafts past a sequence's own γ.
  for (RoundSeq &r : planned)
    r.chain_reserve = (device_ || drafts_by(DrafterKind::kModel)) && r.gamma > 0 &&
                              !r.seq->req.sampling.has_penalties()
                          ? std::max(r.reserve, int64_t{r.seq->kv_len} + max_gamma + 1)
                          : r.reserve;
  return planned;
}

// On a backend whose passes take many rows at about a one-row pass's cost
// (the GPU: 128), a lookup round's drafts, often long copies, go on being
// accepted past γ 6: on the H200 (22m, 8K, sampled) lookup at γ 10 against
// 6 ran 2.56x vanilla against 1.78 at 2 sequences, 1.85 / 1.46 at 4, 1.34 /
// 1.06 at 8; γ 16 was no better. So a lookup round of few sequences drafts up
// to kWideLookupGamma, within set_wide_lookup_rows' rows.
constexpr int32_t kWideLookupGamma = 10;

int32_t SpeculativeDecoder::stats_gamma() const {
  for (const std::unique_ptr<Drafter> &d : drafters_)
    if (d && d->drafts_without_passes()) return std::max(tuning_.max_gamma(), kWideLookupGamma);
  return tuning_.max_gamma();
}

void SpeculativeDecoder::plan_wide_lookup(std::vector<RoundSeq> &planned, bool alternate,
                                          bool select) const {
  // Drafts that cost no pass (lookup's) may go past γ; a selection that
  // captures every verify row has room for γ + 1 of them.
  const Drafter *drafter = drafters_[drafter_index(round_drafter(alternate))].get();
  if (drafter == nullptr || !drafter->drafts_without_passes() || planned.empty() ||
      (select && policy_->needs().score_rows == ScoreRows::kAll))
    return;
  const int32_t wide =
      std::min(kWideLookupGamma, wide_lookup_rows_ / static_cast<int32_t>(planned.size()) - 1);
  for (RoundSeq &r : planned) {
    const Sequence &seq = *r.seq;
    const int32_t remaining = seq.req.max_tokens - seq.n_generated();
    r.lookup_gamma = std::min(wide, remaining - 1);
    if (r.gamma == 0 || r.lookup_gamma <= r.gamma) {
      r.lookup_gamma = 0;
      continue;
    }
    r.lookup_reserve = int64_t{seq.kv_len} + r.lookup_gamma + 1;
  }
}

std::vector<RoundWork> SpeculativeDecoder::round_work(const std::vector<RoundSeq> &seqs) {
  std::vector<RoundWork> work;
  for (const RoundSeq &r : seqs) {
    const Sequence *seq = r.seq;
    RoundWork w{seq,
                &state(*seq),
                r.lookup_room ? r.lookup_gamma : r.gamma,
                // Logprobs read the whole verify rows: no candidates this round.
                seq->req.logprobs ? 0 : candidate_k(seq->req.sampling),
                seq->rng,  // the round's one read of the sequence's RNG
                {},
                {}};
    w.chain_room = r.chain_room;
    w.in_tree = trees();
    if (r.tree_room) w.shape = params_.tree;  // else a chain: a tree of one branch
    w.drafts.resize(static_cast<size_t>(w.gamma));
    w.q.resize(static_cast<size_t>(w.gamma));
    work.push_back(std::move(w));
  }
  return work;
}

void SpeculativeDecoder::pass_by_pass(std::vector<RoundWork> &work, int32_t max_gamma,
                                      BackendContext &context, RoundState &rs) {
  const int32_t vocab = config_.vocab_size;
  const bool model_rows = drafts_on_model(context);
  std::vector<int32_t> inputs(work.size());
  for (int32_t j = 0; j < max_gamma; ++j) {
    ForwardBatch batch;
    std::vector<RoundWork *> in_batch;
    for (size_t i = 0; i < work.size(); ++i) {
      RoundWork &w = work[i];
      if (j >= w.gamma) continue;
      inputs[i] = j == 0 ? w.seq->tokens.back() : w.drafts[static_cast<size_t>(j - 1)];
      batch.seqs.push_back(draft_row(w, j, &inputs[i], model_rows));
      in_batch.push_back(&w);
    }
    const float *logits = nullptr;
    if (rs.by_candidates) {
      rs.cand_k.clear();
      for (const RoundWork *w : in_batch) rs.cand_k.push_back(w->k);
      rs.cands.run(context, batch, rs.cand_k, vocab);
    } else {
      logits = context.forward(batch);
    }
    // Rows are independent (each sequence has its own RNG cursor): build them in parallel.
    parallel_rows(
        static_cast<int64_t>(in_batch.size()),
        [&](int64_t b) {
          RoundWork &w = *in_batch[static_cast<size_t>(b)];
          TokenDistribution &q = w.q[static_cast<size_t>(j)];
          rs.row_distribution(
              logits, b, vocab, w.seq->req.sampling,
              [&](std::vector<int32_t> *h) { build_history(*w.seq, w.drafts, j, h); }, &q);
          w.drafts[static_cast<size_t>(j)] =
              w.seq->req.sampling.greedy() ? q.ids[0] : sample_from(q, w.rng.uniform());
        },
        !(rs.by_candidates && rs.cands.picked()) || in_batch.size() >= threaded_round_seqs());
  }
}

ForwardBatch SpeculativeDecoder::verify_batch(std::vector<RoundWork> &work, RoundState &rs,
                                              bool select) {
  // γ+1 full-attention rows per sequence, with the scores the policy needs.
  const ScoreRows score_rows = policy_->needs().score_rows;
  rs.verify_tokens.assign(work.size(), {});
  rs.row_base.assign(work.size(), 0);
  ForwardBatch verify;
  for (size_t i = 0; i < work.size(); ++i) {
    RoundWork &w = work[i];
    w.verified = w.gamma;
    if (i > 0) rs.row_base[i] = rs.row_base[i - 1] + work[i - 1].verify_rows();
    std::vector<int32_t> &vt = rs.verify_tokens[i];
    std::vector<int32_t> rows = verify_capture_rows(score_rows, w.gamma);
    if (w.in_tree) {  // every node; the rows the policy reads are the main path's
      vt.assign(w.tree.tokens(), w.tree.tokens() + w.tree.n_nodes());
      const std::vector<int32_t> main = w.tree.main_path();
      for (int32_t &row : rows) row = main[static_cast<size_t>(row)];
      w.rows = TokenTree{w.seq->kv_len, w.tree.parents(), w.tree.n_nodes()};
    } else {
      vt.push_back(w.seq->tokens.back());
      vt.insert(vt.end(), w.drafts.begin(), w.drafts.end());  // zeros for fed chain draws
    }
    SeqRows r = sequence_rows(*w.seq, vt.data(), static_cast<int32_t>(vt.size()), w.seq->kv_len,
                              SeqRows::Logits::kAll);
    if (w.in_tree) r.tree = &w.rows;
    // Without `select` nothing is captured: the device's sets and the host's
    // capture stay as the last selection left them.
    if (select && device_) {
      setup_device_select(*w.st, w.seq->id, w.seq->kv_len + 1, rows, r);
    } else if (select && score_rows != ScoreRows::kNone) {
      setup_capture(*w.st, w.seq->kv_len + 1, rows);
      r.capture = &w.st->capture;
    }
    verify.seqs.push_back(r);
  }
  return verify;
}

void SpeculativeDecoder::run_verify(std::vector<RoundWork> &work, const ForwardBatch &verify,
                                    BackendContext &context, RoundState &rs,
                                    const std::function<void()> &drafts_read) {
  if (!rs.by_candidates) {
    rs.vlogits = context.forward(verify);
    return;
  }
  const int32_t vocab = config_.vocab_size;
  rs.cand_k.clear();
  for (const RoundWork &w : work)
    rs.cand_k.insert(rs.cand_k.end(), static_cast<size_t>(w.verify_rows()), w.k);
  if (!rs.chain_begun) {
    rs.cands.run(context, verify, rs.cand_k, vocab);
    return;
  }
  // The chain's draws (and, with the acceptance on the host, q) are read
  // while the verify pass runs.
  const std::vector<int32_t> fed = chain_feed(work, rs.chain);
  const std::vector<BackendContext::AcceptOnDevice> specs = device_accept_specs(work, rs.row_base);
  const bool began = rs.cands.run_fed(context, verify, rs.cand_k, vocab, fed.data(),
                                      params_.debug_host_acceptance ? nullptr : &specs, [&] {
                                        rs.chain_read = finish_chain(rs.chain, context);
                                        drafts_read();
                                        // With the acceptance on the device, q is built only for a
                                        // sequence the device hands back (a candidate overflow).
                                        if (!rs.chain_read)
                                          drop_chained_drafts(rs.chain);
                                        else if (!rs.cands.accept_begun())
                                          build_chained_q(rs.chain);
                                      });
  if (!began)
    fail(VEGAS_ERR_INTERNAL, "the backend began a draft chain but no verify pass behind it");
  // The device's acceptance, where the chain's drafts were read (else they
  // were dropped after the device tested them).
  if (rs.cands.accept_begun()) {
    context.end_accept(&rs.accepted);
    if (!rs.chain_read) rs.accepted.clear();
  }
}

void SpeculativeDecoder::accept_round(std::vector<RoundWork> &work, RoundState &rs,
                                      std::vector<AcceptResult> *results) {
  const int32_t vocab = config_.vocab_size;
  results->assign(work.size(), AcceptResult{});
  // Per sequence, independent of the others, so in parallel.
  parallel_rows(
      static_cast<int64_t>(work.size()),
      [&](int64_t wi) {
        RoundWork &w = work[static_cast<size_t>(wi)];
        const Sequence &seq = *w.seq;
        AcceptResult &result = (*results)[static_cast<size_t>(wi)];
        const int64_t base = rs.row_base[static_cast<size_t>(wi)];
        if (!rs.accepted.empty() &&
            take_device_acceptance(w, rs.accepted[static_cast<size_t>(wi)], rs.chain, &result))
          return;
        if (w.in_tree) return accept_tree(w, rs, base, &result);
        std::vector<TokenDistribution> p(static_cast<size_t>(w.gamma) + 1);
        auto target = [&](int32_t row) -> const TokenDistribution & {
          TokenDistribution &d = p[static_cast<size_t>(row)];
          rs.row_distribution(
              rs.vlogits, base + row, vocab, seq.req.sampling,
              [&](std::vector<int32_t> *h) { build_history(seq, w.drafts, row, h); }, &d);
          return d;
        };
        if (seq.req.sampling.greedy()) {
          std::vector<int32_t> argmaxes;
          for (int32_t row = 0; row <= w.gamma; ++row) {
            argmaxes.push_back(target(row).ids[0]);
            if (row < w.gamma && argmaxes.back() != w.drafts[static_cast<size_t>(row)]) break;
          }
          argmaxes.resize(static_cast<size_t>(w.gamma) + 1, -1);
          accept_greedy(w.drafts.data(), w.gamma, argmaxes.data(), &result);
        } else {
          accept_sampled(w.drafts.data(), w.q.data(), w.gamma, target, w.rng, &result,
                         params_.debug_broken_residual ? ResidualRule::kBrokenFromTarget
                                                       : ResidualRule::kLossless);
        }
      },
      // The device's records are read, not computed: no threads for them.
      rs.accepted.empty() &&
          (!(rs.by_candidates && rs.cands.picked()) || work.size() >= threaded_round_seqs()));
}

std::vector<RoundOutcome> SpeculativeDecoder::outcomes(const std::vector<RoundSeq> &seqs,
                                                       const std::vector<RoundWork> &work,
                                                       const std::vector<AcceptResult> &results,
                                                       const RoundState &rs) {
  const int32_t vocab = config_.vocab_size;
  std::vector<RoundOutcome> out(work.size());
  for (size_t i = 0; i < work.size(); ++i) {
    const RoundWork &w = work[i];
    const AcceptResult &result = results[i];
    // A tree drafts its nodes but the root; a chain its γ.
    const int32_t drafted = w.in_tree ? w.tree.n_nodes() - 1 : w.gamma;
    totals_.rounds += 1;
    totals_.drafted += drafted;
    totals_.accepted += result.n_accepted;
    totals_.longest_gamma = std::max(totals_.longest_gamma, w.gamma);
    for (int32_t k = 0; k < w.gamma; ++k) {
      totals_.drafted_at[static_cast<size_t>(k)] += 1;
      if (k < result.n_accepted) totals_.accepted_at[static_cast<size_t>(k)] += 1;
    }
    RoundOutcome &o = out[i];
    o.seq = seqs[i].seq;
    o.tokens = result.tokens;
    // Token r was drawn from verify row r (an accepted draft, then the
    // correction or bonus token); in a tree, from the row of the r-th node
    // of the accepted path (the root first).
    for (size_t r = 0; r < result.tokens.size(); ++r) {
      const int64_t row = !w.in_tree ? static_cast<int64_t>(r)
                          : r == 0   ? 0
                                     : w.tree_result.path[r - 1];
      o.rows.push_back(rs.by_candidates ? nullptr : rs.vlogits + (rs.row_base[i] + row) * vocab);
    }
    // t0 and the accepted drafts hold exact K/V; the rest is rolled back.
    o.kv_len = w.seq->kv_len + 1 + result.n_accepted;
    o.rng_counter = w.rng.counter();
    o.drafted = drafted;
    o.accepted = result.n_accepted;
  }
  return out;
}

// What end_round needs of the round that made the outcomes.
struct SpeculativeDecoder::PendingRound {
  std::vector<RoundWork> work;
  std::vector<int32_t> n_accepted;
  RoundObservation cost;
  RoundTrace trace;
  // How it drafted: the sparse passes, prompt lookup or the draft model.
  DrafterKind drafter = DrafterKind::kSparse;
  bool alternate() const { return drafter != DrafterKind::kSparse; }
  bool select = true;  // round()'s `select`
};

std::vector<RoundOutcome> SpeculativeDecoder::round(const std::vector<RoundSeq> &seqs,
                                                    BackendContext &context, bool alternate,
                                                    bool select) {
  pending_.reset();
  auto pending = std::make_unique<PendingRound>();
  RoundTrace &trace = pending->trace;
  std::vector<RoundWork> work = round_work(seqs);
  if (work.empty()) return {};
  RoundState rs;
  for (const RoundWork &w : work) rs.by_candidates = rs.by_candidates && w.k > 0;
  trace.mark("prepare");

  // Draft: γ single-row sparse forward passes, batched over the sequences,
  // chained on the device where the backend can (read while the verify pass,
  // enqueued behind them with their draws fed on the device, runs).
  const double t_draft = now_seconds();
  int32_t max_gamma = 0;
  for (const RoundWork &w : work) max_gamma = std::max(max_gamma, w.gamma);
  pending->drafter = round_drafter(alternate);
  if (draft_selects_ && pending->drafter == DrafterKind::kSparse) select_from_draft(work);
  Drafter &drafter_of_round = drafter(pending->drafter);
  RoundDrafting drafting{work, max_gamma, context, rs, *this};
  drafter_of_round.draft(drafting);
  double t_verify = now_seconds(), draft_seconds = 0.0;
  auto drafts_read = [&] {
    t_verify = now_seconds();
    draft_seconds = t_verify - t_draft;
    if (query_aware_) {  // the selection ran inside the draft passes: count it apart
      const double select_s = context.take_select_seconds();
      draft_seconds -= select_s;
      totals_.select_seconds += select_s;
    }
    totals_.draft_seconds += draft_seconds;
    trace.mark("draft");
  };
  if (!rs.chain_begun) drafts_read();

  // Verify, then accept. P@model's verify pass captures nothing: its next
  // sets come from the draft model (select_from_draft).
  pending->select = select && !draft_selects_;
  const ForwardBatch verify = verify_batch(work, rs, pending->select);
  run_verify(work, verify, context, rs, drafts_read);
  double verify_seconds = now_seconds() - t_verify;
  if (device_) {  // the selection kernel ran inside the verify pass: count it apart
    const double select_s = context.take_select_seconds();
    verify_seconds -= select_s;
    totals_.select_seconds += select_s;
  }
  totals_.verify_seconds += verify_seconds;
  trace.mark("verify");
  // What the round cost, for the tuning of each sequence's γ and ratio.
  RoundObservation &cost = pending->cost;
  cost.draft_step_seconds = max_gamma > 0 ? draft_seconds / max_gamma : 0.0;
  cost.verify_seconds = verify_seconds;
  cost.verify_rows = verify.total_rows();
  std::vector<AcceptResult> results;
  accept_round(work, rs, &results);
  if (trees()) compact_trees(work, context);
  for (const AcceptResult &r : results) pending->n_accepted.push_back(r.n_accepted);
  drafter_of_round.settle(work, pending->n_accepted);
  trace.mark("accept");

  std::vector<RoundOutcome> out = outcomes(seqs, work, results, rs);
  pending->work = std::move(work);
  pending_ = std::move(pending);
  return out;
}

void SpeculativeDecoder::end_round(const std::vector<RoundOutcome> &outcomes,
                                   BackendContext &context) {
  if (!pending_) return;
  const std::unique_ptr<PendingRound> pending = std::move(pending_);
  pending->trace.mark("commit");
  const ScoreRows score_rows = policy_->needs().score_rows;
  std::vector<BackendContext::DeferredSelect> deferred;
  int64_t committed = 0;
  for (size_t i = 0; i < pending->work.size() && i < outcomes.size(); ++i) {
    RoundWork &w = pending->work[i];
    const Sequence &seq = *w.seq;
    committed += outcomes[i].committed;
    totals_.committed += outcomes[i].committed;
    if (seq.finished()) continue;  // its state is gone (forget)
    const int32_t n_accepted = pending->n_accepted[i];
    // Before selecting: a new ratio applies to this selection. A lookup round
    // says nothing of the sparse drafts' γ and ratio.
    if (w.gamma > 0 && !pending->alternate()) {
      RoundObservation obs = pending->cost;
      obs.drafted = w.gamma;
      obs.accepted = n_accepted;
      obs.context = seq.kv_len;
      observe_round(seq.id, *w.st, obs);
    }
    // A tree's captured rows are its main path: the last accepted of them.
    const int32_t on_main =
        w.in_tree ? w.tree.accepted_on_main_path(w.tree_result.path) : n_accepted;
    if (!pending->select) continue;  // the sparse passes keep their last selection
    // The next round's draft passes select, or nothing is selected.
    const bool renews = !query_aware_ && own_ == DrafterKind::kSparse;
    totals_.selections += renews ? 1 : 0;
    if (device_) {  // selected by the verify pass, or now from the last accepted row
      if (w.st->device_select.deferred) deferred.push_back({seq.id, on_main});
      continue;
    }
    if (!renews) continue;
    const double t_select = now_seconds();
    if (score_rows == ScoreRows::kNone) w.st->capture.n_rows = 0;
    const int32_t last_row = score_rows == ScoreRows::kAll ? on_main : (w.gamma > 0 ? 1 : 0);
    // The candidates were the positions before this round's first token
    // (RoundOutcome::kv_len counts it and the accepted drafts).
    select(seq, *w.st, outcomes[i].kv_len - n_accepted, last_row);
    totals_.select_seconds += now_seconds() - t_select;
  }
  if (!deferred.empty()) context.select_deferred(deferred);
  if (device_) totals_.select_seconds += context.take_select_seconds();
  pending->trace.mark("select");
  int32_t max_gamma = 0;
  for (const RoundWork &w : pending->work) max_gamma = std::max(max_gamma, w.gamma);
  pending->trace.finish(pending->work.size(), max_gamma, drafter_name(pending->drafter), committed);
}

}  // namespace vegas
