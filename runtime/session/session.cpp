#include "session/session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "common/parallel_rows.h"
#include "session/sequence_rows.h"

namespace vegas {

namespace {

// Auto mode learns from a decode step; VEGAS_AUTO_TRACE=1 prints each
// observation and the rates it leaves (stderr), to see what the chooser saw.
void observe_step(ModeChooser &chooser, const SessionParams &params, ModeChooser::Kind kind,
                  int32_t n_decoding, int64_t tokens, double wall_seconds, int32_t first_decodes) {
  const double seconds =
      params.step_seconds ? params.step_seconds(kind, wall_seconds) : wall_seconds;
  chooser.observe(kind, n_decoding, tokens, seconds, first_decodes);
  static const bool trace = [] {
    const char *env = std::getenv("VEGAS_AUTO_TRACE");
    return env != nullptr && std::strcmp(env, "1") == 0;
  }();
  if (!trace) return;
  using K = ModeChooser::Kind;
  std::fprintf(stderr,
               "[vegas-auto] %s n %d (first %d) tokens %lld %.3f ms -> round %.0f alternate %.0f "
               "vanilla %.0f tok/s, probe every %d\n",
               kind == K::kRound       ? "round    "
               : kind == K::kAlternate ? "alternate"
                                       : "vanilla  ",
               n_decoding, first_decodes, static_cast<long long>(tokens), seconds * 1e3,
               chooser.rate(K::kRound, n_decoding), chooser.rate(K::kAlternate, n_decoding),
               chooser.rate(K::kVanilla, n_decoding), chooser.probe_interval(n_decoding));
}

}  // namespace

namespace {

constexpr uint64_t kDefaultCpuKvBytes = 256ull << 20;
constexpr uint64_t kDefaultCudaKvBytes = 4ull << 30;

int32_t pages_for_budget(const BackendModel &backend, const SessionParams &p) {
  if (p.page_size <= 0 || p.page_size > 4096)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "page_size " + std::to_string(p.page_size) + " must be in [1, 4096]");
  if (p.max_batch <= 0 || p.max_batch > 4096)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "max_batch " + std::to_string(p.max_batch) + " must be in [1, 4096]");
  if (p.prefill_chunk <= 0 || p.prefill_chunk > 65536)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "prefill_chunk " + std::to_string(p.prefill_chunk) + " must be in [1, 65536]");
  uint64_t budget = p.kv_bytes;
  if (budget == 0)
    budget = backend.kind() == BackendKind::kCuda ? kDefaultCudaKvBytes : kDefaultCpuKvBytes;
  const uint64_t page_bytes =
      backend.kv_bytes_per_token(p.kv_fp8) * static_cast<uint64_t>(p.page_size);
  const uint64_t pages = budget / page_bytes;
  if (pages == 0)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "kv_bytes " + std::to_string(budget) +
                                         " is smaller than one KV page (" +
                                         std::to_string(page_bytes) + " bytes)");
  if (pages > 0x7fffffffull / static_cast<uint64_t>(p.page_size))
    fail(VEGAS_ERR_INVALID_ARGUMENT, "kv_bytes " + std::to_string(budget) + " is too large");
  return static_cast<int32_t>(pages);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The one writer of a sequence's time statistics: the seconds of a step it
// took part in, as prefill or as decoding.
void count_seconds(Sequence &seq, bool prefill, double seconds) {
  (prefill ? seq.stats.prefill_seconds : seq.stats.decode_seconds) += seconds;
}

// What a round did to a sequence before any of its tokens is committed: its
// RNG past every draw of the round and the round counted, whether or not
// it stops inside its tokens. The one writer of SequenceStats' rounds,
// drafted and accepted; the RNG's other writers are the session's own draws.
void begin_outcome(const RoundOutcome &o) {
  Sequence &seq = *o.seq;
  seq.rng.set_counter(o.rng_counter);
  seq.stats.rounds += 1;
  seq.stats.drafted += o.drafted;
  seq.stats.accepted += o.accepted;
}

// Sets a flag for the lifetime of a scope (reentrancy guards).
class FlagScope {
 public:
  explicit FlagScope(bool &flag) : flag_(flag) { flag_ = true; }
  ~FlagScope() { flag_ = false; }
  FlagScope(const FlagScope &) = delete;
  FlagScope &operator=(const FlagScope &) = delete;

 private:
  bool &flag_;
};

}  // namespace

Session::Session(std::shared_ptr<Model> model, const SessionParams &params)
    : model_(std::move(model)),
      params_(params),
      kv_(pages_for_budget(model_->backend(), params), params.page_size, params.prefix_cache),
      scheduler_(kv_,
                 SchedulingParams{params.max_batch, params.prefill_chunk, params.prefill_first}) {
  ContextParams cp;
  cp.num_pages = kv_.pool().num_pages();
  cp.page_size = params_.page_size;
  cp.kv_fp8 = params_.kv_fp8;
  // Embedding rows past the tokenizer's tokens are never drawn (they cannot be decoded).
  if (model_->has_tokenizer() && model_->tokenizer().vocab_size() < model_->config().vocab_size)
    cp.logit_limit = model_->tokenizer().vocab_size();
  cp.max_rows = params_.prefill_chunk + params_.max_batch;
  if (params_.speculative) {
    const int64_t capacity = int64_t{kv_.pool().num_pages()} * kv_.pool().page_size();
    // Quest's pages are the KV pages: the backends keep one key bound per KV
    // page (the ABI has no separate quest page size).
    params_.spec.selection.quest_page_size = params_.page_size;
    params_.spec.host_threads = model_->host_threads();
    spec_ = std::make_unique<SpeculativeDecoder>(
        model_->config(), params_.spec, static_cast<int32_t>(std::min<int64_t>(capacity, 1 << 30)));
    // A verification pass carries gamma + 1 rows per sequence, or a tree's nodes.
    cp.max_rows = std::max(cp.max_rows, params_.max_batch * spec_->max_verify_rows());
    cp.warm_rows = params_.max_batch * spec_->max_verify_rows();
    cp.key_bounds = spec_->policy().needs().page_bounds;
    // Auto mode weighs vanilla steps against rounds, a hybrid policy its two
    // drafters: one chooser for every kind in play.
    chooser_ = ModeChooser(params_.auto_mode, spec_->hybrid());
  }
  context_ = model_->backend().create_context(cp);
  if (spec_ && spec_->trees() && !context_->token_trees())
    fail(VEGAS_ERR_UNSUPPORTED,
         "token trees (tree_branches > 1, tree_depth > 0): this backend has no tree attention");
  if (spec_) {
    spec_->use_device_selection(context_->device_selection());
    const int32_t wide =
        params_.wide_lookup_rows >= 0 ? params_.wide_lookup_rows : context_->cheap_pass_rows();
    spec_->set_wide_lookup_rows(std::min(wide, cp.max_rows));
  }
  if (spec_ && params_.spec.draft_model) make_draft_context(cp);
}

Session::~Session() = default;

void Session::make_draft_context(const ContextParams &target) {
  if (!params_.draft_model)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "a draft-model session without a draft model");
  const Model &draft = *params_.draft_model;
  const int32_t vocab = model_->config().vocab_size;
  if (draft.config().vocab_size != vocab)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "the draft model's vocabulary has " + std::to_string(draft.config().vocab_size) +
             " ids, the model's " + std::to_string(vocab) + ": it must be the same tokenizer's");
  if (model_->has_tokenizer() && draft.has_tokenizer() &&
      draft.tokenizer().vocab_size() != model_->tokenizer().vocab_size())
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "the draft model's tokenizer has " + std::to_string(draft.tokenizer().vocab_size()) +
             " tokens, the model's " + std::to_string(model_->tokenizer().vocab_size()));
  ContextParams dp;
  dp.num_pages = target.num_pages;  // the same page ids, its own storage
  dp.page_size = target.page_size;
  dp.kv_fp8 = target.kv_fp8;
  dp.logit_limit = target.logit_limit;
  // A draft pass has a row per sequence; the catch-up runs prefill chunks.
  dp.max_rows = std::max(params_.prefill_chunk, params_.max_batch);
  draft_context_ = draft.backend().create_context(dp);
  spec_->use_draft_context(draft_context_.get(), dp.max_rows, draft.config().n_layers,
                           draft.config().n_heads);
}

int32_t Session::submit(SequenceRequest request) {
  if (in_callback_) fail(VEGAS_ERR_WRONG_STATE, "vegas_session_submit called from a callback");
  const int32_t vocab = model_->config().vocab_size;
  if (request.prompt.empty()) fail(VEGAS_ERR_INVALID_ARGUMENT, "the prompt is empty");
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    const int32_t t = request.prompt[i];
    if (t < 0 || t >= vocab)
      fail(VEGAS_ERR_TOKEN_OUT_OF_RANGE, "prompt token " + std::to_string(i) + " is " +
                                             std::to_string(t) + ", outside [0, " +
                                             std::to_string(vocab) + ")");
  }
  for (int32_t t : request.stop_ids)
    if (t < 0 || t >= vocab)
      fail(VEGAS_ERR_TOKEN_OUT_OF_RANGE,
           "stop id " + std::to_string(t) + " is outside [0, " + std::to_string(vocab) + ")");
  if (request.max_tokens < 0)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "max_tokens " + std::to_string(request.max_tokens) + " < 0");
  validate_sampling_params(request.sampling);
  if (request.top_logprobs < 0 || request.top_logprobs > kMaxTopLogprobs)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "top_logprobs " + std::to_string(request.top_logprobs) +
                                         " is outside [0, " + std::to_string(kMaxTopLogprobs) +
                                         "]");
  const int64_t window = model_->config().sliding_window;
  if (window > 0 && static_cast<int64_t>(request.prompt.size()) + request.max_tokens > window)
    fail(VEGAS_ERR_UNSUPPORTED,
         "prompt + max_tokens (" +
             std::to_string(static_cast<int64_t>(request.prompt.size()) + request.max_tokens) +
             ") exceeds the model's sliding window of " + std::to_string(window) +
             " tokens; sliding-window attention is not implemented yet");
  const int64_t needed = static_cast<int64_t>(request.prompt.size()) + 1;
  if (kv_.pool().pages_for(needed) > kv_.pool().num_pages())
    fail(VEGAS_ERR_KV_FULL,
         "the prompt (" + std::to_string(request.prompt.size()) +
             " tokens) does not fit the KV pool (" +
             std::to_string(int64_t{kv_.pool().num_pages()} * kv_.pool().page_size()) + " tokens)");
  const int32_t id = next_id_.fetch_add(1);
  auto seq = std::make_unique<Sequence>(id, std::move(request),
                                        model_->has_tokenizer() ? &model_->tokenizer() : nullptr);
  // The longest cached prefix, leaving at least two prompt rows to prefill:
  // the last one's logits give the first token and a prefill (not a decode
  // step) makes the first selection of VEGAS mode.
  const int64_t n_prompt = seq->n_prompt();
  if (n_prompt > 2) kv_.attach_prefix(*seq, n_prompt - 2);
  sequences_.emplace(id, std::move(seq));
  return id;
}

Sequence &Session::find(int32_t seq_id) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) fail(VEGAS_ERR_NOT_FOUND, "no sequence " + std::to_string(seq_id));
  return *it->second;
}

const Sequence &Session::sequence(int32_t seq_id) const {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) fail(VEGAS_ERR_NOT_FOUND, "no sequence " + std::to_string(seq_id));
  return *it->second;
}

void Session::release(int32_t seq_id) {
  if (in_callback_ || in_step_)
    fail(VEGAS_ERR_WRONG_STATE, "vegas_sequence_release called from a callback");
  Sequence &seq = find(seq_id);
  publish(seq);
  kv_.release(seq);
  sequences_.erase(seq_id);
}

void Session::cancel(int32_t seq_id) {
  if (seq_id < -1 || seq_id >= next_id_.load())
    fail(VEGAS_ERR_NOT_FOUND, "no sequence " + std::to_string(seq_id));
  std::lock_guard<std::mutex> lock(cancel_mutex_);
  pending_cancels_.emplace_back(seq_id, next_id_.load());
  has_pending_cancels_.store(true, std::memory_order_release);
}

void Session::apply_cancellations() {
  if (!has_pending_cancels_.load(std::memory_order_acquire)) return;
  std::vector<std::pair<int32_t, int32_t>> asked;
  {
    std::lock_guard<std::mutex> lock(cancel_mutex_);
    asked.swap(pending_cancels_);
    has_pending_cancels_.store(false, std::memory_order_relaxed);
  }
  for (const auto &[id, bound] : asked) {
    for (auto &entry : sequences_) {
      Sequence &seq = *entry.second;
      const bool named = id == -1 ? seq.id < bound : id == seq.id;
      if (named && !seq.finished()) finish(seq, VEGAS_FINISH_CANCELLED, VEGAS_OK);
    }
  }
}

int32_t Session::active_count() const {
  int32_t n = 0;
  for (const auto &entry : sequences_) n += !entry.second->finished();
  return n;
}

void Session::finish(Sequence &seq, vegas_finish_reason reason, vegas_status status) {
  seq.finish = reason;
  seq.status = status;
  publish(seq);
  kv_.release(seq);
  if (spec_) {
    spec_->forget(seq.id);
    context_->forget_selection(seq.id);
  }
}

void Session::emit(Sequence &seq, int32_t token, const std::string &piece) {
  seq.text.append(piece);
  if (seq.req.on_token == nullptr) return;
  int32_t stop;
  {
    FlagScope guard(in_callback_);
    stop = seq.req.on_token(seq.id, token, piece.data(), piece.size(), seq.req.user_data);
  }
  if (stop != 0 && !seq.finished()) finish(seq, VEGAS_FINISH_CALLBACK, VEGAS_OK);
}

void Session::commit_token(Sequence &seq, int32_t token, const float *row) {
  // A synthetic model has no tokenizer: only config.json's eos id ends a sequence.
  const int32_t tokenizer_eos = model_->has_tokenizer() ? model_->tokenizer().special_ids().eos
                                                        : model_->config().eos_token_id;
  const bool is_eos =
      !seq.req.ignore_eos && (token == tokenizer_eos || token == model_->config().eos_token_id);
  const bool is_stop_id =
      std::find(seq.req.stop_ids.begin(), seq.req.stop_ids.end(), token) != seq.req.stop_ids.end();
  if (is_eos || is_stop_id) {
    // The ending token is reported with whatever text was still held back.
    std::string rest = seq.detokenizer ? seq.detokenizer->flush() : std::string();
    StopFilter::Result r = seq.stop_filter.push(rest);
    std::string piece = r.emit;
    if (!r.stopped) piece += seq.stop_filter.finish();
    finish(seq, is_eos ? VEGAS_FINISH_EOS : VEGAS_FINISH_STOP, VEGAS_OK);
    emit(seq, token, piece);
    return;
  }
  if (seq.req.logprobs) {
    if (row == nullptr) fail(VEGAS_ERR_INTERNAL, "a logprobs sequence's row did not come back");
    const int32_t vocab = model_->config().vocab_size;
    if (seq.req.processed_logprobs) {
      // The rule over the history the token was drawn after, as its step had it.
      std::vector<int32_t> history;
      if (seq.req.sampling.has_penalties()) history.assign(seq.tokens.begin(), seq.tokens.end());
      TokenDistribution dist;
      build_distribution(row, vocab, seq.req.sampling, history, &dist);
      seq.logprobs.push_back(distribution_logprobs(dist, token, seq.req.top_logprobs));
    } else {
      seq.logprobs.push_back(row_logprobs(row, vocab, token, seq.req.top_logprobs));
    }
  }
  seq.tokens.push_back(token);
  const bool last = seq.n_generated() >= seq.req.max_tokens;
  std::string text;
  if (seq.detokenizer) {
    text = seq.detokenizer->push(token);
    if (last) text += seq.detokenizer->flush();
  }
  StopFilter::Result r = seq.stop_filter.push(text);
  std::string piece = r.emit;
  if (r.stopped) {
    finish(seq, VEGAS_FINISH_STOP, VEGAS_OK);
  } else if (last) {
    piece += seq.stop_filter.finish();
    finish(seq, VEGAS_FINISH_LENGTH, VEGAS_OK);
  }
  emit(seq, token, piece);
}

void Session::publish(Sequence &seq) {
  kv_.publish(seq);
}

SeqRows Session::pending_rows(Sequence &seq, int32_t n_tokens) {
  const bool ends_prompt = seq.kv_len + n_tokens == static_cast<int32_t>(seq.tokens.size());
  return sequence_rows(seq, seq.tokens.data() + seq.kv_len, n_tokens, seq.kv_len,
                       ends_prompt ? SeqRows::Logits::kLast : SeqRows::Logits::kNone);
}

void Session::publish_running() {
  for (auto &entry : sequences_)
    if (!entry.second->finished()) publish(*entry.second);
}

ModeChooser::Prior Session::mode_prior(const std::vector<Sequence *> &decoding) const {
  ModeChooser::Prior prior;
  const TuningProfile *profile = params_.spec.profile.get();
  if (profile == nullptr || decoding.empty()) return prior;
  int64_t context = 0;
  for (const Sequence *seq : decoding) context += seq->kv_len;
  context /= static_cast<int64_t>(decoding.size());
  // Only a bucket that holds the shape: the nearest one (lookup's fallback)
  // measured another shape, where what paid says little about this one.
  const int64_t batch = static_cast<int64_t>(decoding.size());
  const TuningBucket &b = profile->lookup(context, batch);
  prior.vanilla = b.vanilla_for(params_.spec.draft_model) && b.contains(context, batch);
  return prior;
}

ModeChooser::Kind Session::decode_kind(const std::vector<Sequence *> &decoding) {
  if (!spec_) return ModeChooser::Kind::kVanilla;
  if (!choosing()) return ModeChooser::Kind::kRound;
  const ModeChooser::Prior prior = params_.auto_mode ? mode_prior(decoding) : ModeChooser::Prior{};
  return chooser_.next(static_cast<int32_t>(decoding.size()), prior);
}

bool Session::choosing() const {
  return spec_ && (params_.auto_mode || spec_->hybrid());
}

int32_t Session::step() {
  if (in_callback_) fail(VEGAS_ERR_WRONG_STATE, "vegas_session_step called from a callback");
  if (in_step_) fail(VEGAS_ERR_WRONG_STATE, "vegas_session_step is already running");
  FlagScope step_guard(in_step_);
  apply_cancellations();

  // Sequences with nothing to generate finish at once.
  for (auto &entry : sequences_) {
    Sequence &seq = *entry.second;
    if (!seq.finished() && seq.req.max_tokens == 0) finish(seq, VEGAS_FINISH_LENGTH, VEGAS_OK);
  }
  StepPlan plan = scheduler_.plan(sequences_, [this](const std::vector<Sequence *> &decoding) {
    return decode_kind(decoding);
  });
  const int32_t n_decoding = static_cast<int32_t>(plan.decoding.size());
  int32_t first_decodes = 0;  // sequences whose first decode step this is
  for (const Sequence *seq : plan.decoding) first_decodes += seq->n_generated() == 1;

  // Decode-only vanilla steps: several at once where the backend chains them.
  if (plan.kind == ModeChooser::Kind::kVanilla && plan.decode_only()) {
    const auto t_chain = std::chrono::steady_clock::now();
    const int64_t committed = chained_vanilla_steps(plan.decoding);
    if (committed >= 0) {
      const double chain_seconds = seconds_since(t_chain);
      for (Sequence *seq : plan.decoding) count_seconds(*seq, false, chain_seconds);
      if (params_.auto_mode)
        observe_step(chooser_, params_, plan.kind, n_decoding, committed, chain_seconds,
                     first_decodes);
      publish_running();
      return active_count();
    }
  }
  // A sequence that does not fit stops with KV_FULL and keeps every token it has.
  for (Sequence *seq : scheduler_.reserve_forward(plan))
    finish(*seq, VEGAS_FINISH_ERROR, VEGAS_ERR_KV_FULL);
  if (!plan.forward.empty()) {
    const auto t_forward = std::chrono::steady_clock::now();
    const int64_t committed = forward_step(plan);
    // Auto mode learns from decode-only steps (no prompt rows in the batch).
    if (params_.auto_mode && plan.kind == ModeChooser::Kind::kVanilla && plan.decode_only())
      observe_step(chooser_, params_, plan.kind, n_decoding, committed, seconds_since(t_forward),
                   first_decodes);
  }
  if (plan.kind != ModeChooser::Kind::kVanilla && !plan.decoding.empty()) {
    const auto t_round = std::chrono::steady_clock::now();
    std::vector<Sequence *> live;
    for (Sequence *seq : plan.decoding)
      if (!seq->finished()) live.push_back(seq);
    const int64_t committed = speculative_round(live, plan.kind == ModeChooser::Kind::kAlternate);
    const double round_seconds = seconds_since(t_round);
    for (Sequence *seq : live) count_seconds(*seq, false, round_seconds);
    if (choosing())
      observe_step(chooser_, params_, plan.kind, n_decoding, committed, round_seconds,
                   first_decodes);
  }
  publish_running();
  return active_count();
}

int64_t Session::forward_step(const StepPlan &plan) {
  const auto t0 = std::chrono::steady_clock::now();
  const ForwardBatch batch = forward_batch(plan);
  const ForwardDraws draws = forward_and_draw(plan.forward, batch, t0);
  return commit_forward(plan, batch, draws);
}

ForwardBatch Session::forward_batch(const StepPlan &plan) {
  ForwardBatch batch;
  for (size_t i = 0; i < plan.forward.size(); ++i) {
    Sequence &seq = *plan.forward[i];
    SeqRows r = pending_rows(seq, plan.rows[i]);
    if (spec_ && r.logits == SeqRows::Logits::kLast && seq.n_generated() == 0) {
      spec_->prepare_prefill_capture(seq, r, active_count());
      record_tuning(seq);  // the tuning starts with it
    }
    batch.seqs.push_back(r);
  }
  return batch;
}

Session::ForwardDraws Session::forward_and_draw(const std::vector<Sequence *> &ready,
                                                const ForwardBatch &batch,
                                                std::chrono::steady_clock::time_point t0) {
  ForwardDraws d;
  d.logit_row.assign(ready.size(), -1);
  d.token.assign(ready.size(), -1);
  std::vector<RowSampling> row_rules;
  for (size_t i = 0; i < ready.size(); ++i) {
    if (batch.seqs[i].logits == SeqRows::Logits::kNone) continue;
    d.logit_row[i] = static_cast<int64_t>(row_rules.size());
    const Sequence &seq = *ready[i];
    RowSampling rule;
    rule.params = &seq.req.sampling;
    rule.rng_counter = seq.rng.counter();
    rule.history = seq.tokens.data();
    rule.history_len = static_cast<int32_t>(seq.tokens.size());
    row_rules.push_back(rule);
  }
  // Sampling on the device when the backend can (only the ids come back);
  // otherwise the logits come back and every row is drawn here, in parallel
  // (each sequence has its own Rng), then committed in order on this thread.
  std::vector<int32_t> device_ids(row_rules.size());
  // A sequence that records logprobs needs its whole row on the host.
  bool rows_wanted = false;
  for (size_t i = 0; i < ready.size(); ++i)
    rows_wanted = rows_wanted || (d.logit_row[i] >= 0 && ready[i]->req.logprobs);
  const bool on_device = !row_rules.empty() && !rows_wanted &&
                         context_->forward_sample(batch, row_rules.data(), device_ids.data());
  d.logits = on_device ? nullptr : context_->forward(batch);
  if (spec_ && params_.spec.draft_model) follow_prefill(ready, batch);
  d.seconds = seconds_since(t0);
  if (on_device) {
    for (size_t i = 0; i < ready.size(); ++i) {
      if (d.logit_row[i] < 0) continue;
      Sequence &seq = *ready[i];
      d.token[i] = device_ids[static_cast<size_t>(d.logit_row[i])];
      // The device drew with the counter it was given; a sampled row used one draw.
      if (!seq.req.sampling.greedy()) seq.rng.skip(1);
    }
    return d;
  }
  const int32_t vocab = model_->config().vocab_size;
  parallel_rows(static_cast<int64_t>(ready.size()), [&](int64_t i) {
    const size_t at = static_cast<size_t>(i);
    Sequence &seq = *ready[at];
    if (d.logit_row[at] < 0 || seq.finished()) return;
    std::vector<int32_t> history;
    if (seq.req.sampling.has_penalties()) history.assign(seq.tokens.begin(), seq.tokens.end());
    TokenDistribution dist;
    build_distribution(d.logits + d.logit_row[at] * vocab, vocab, seq.req.sampling, history, &dist);
    d.token[at] = seq.req.sampling.greedy() ? dist.ids[0] : sample_from(dist, seq.rng.uniform());
  });
  return d;
}

int64_t Session::commit_forward(const StepPlan &plan, const ForwardBatch &batch,
                                const ForwardDraws &d) {
  const int32_t vocab = model_->config().vocab_size;
  int64_t committed = 0;
  for (size_t i = 0; i < plan.forward.size(); ++i) {
    Sequence &seq = *plan.forward[i];
    const bool prefill = plan.rows[i] > 1 || seq.n_generated() == 0;
    count_seconds(seq, prefill, d.seconds);
    // Cancelled from a callback of an earlier sequence: its pages are gone.
    if (seq.finished()) continue;
    scheduler_.advance(seq, plan.rows[i]);
    if (batch.seqs[i].logits == SeqRows::Logits::kNone) continue;
    const bool first_token = seq.n_generated() == 0;
    commit_token(seq, d.token[i], d.logits ? d.logits + d.logit_row[i] * vocab : nullptr);
    ++committed;
    if (spec_ && first_token && !seq.finished()) spec_->select_after_prefill(seq);
  }
  return committed;
}

void Session::follow_prefill(const std::vector<Sequence *> &ready, const ForwardBatch &batch) {
  std::vector<const Sequence *> prompts;
  std::vector<SeqRows> rows;
  for (size_t i = 0; i < ready.size(); ++i) {
    if (ready[i]->n_generated() > 0 || ready[i]->finished()) continue;
    prompts.push_back(ready[i]);
    rows.push_back(batch.seqs[i]);
  }
  if (!prompts.empty()) spec_->follow_prefill(prompts, rows);
}

int64_t Session::speculative_round(const std::vector<Sequence *> &seqs, bool alternate) {
  // While the alternate drafter leads, its rounds make no selection for the
  // sparse passes (their probes draft from the last one, as losslessly).
  const bool select = !alternate || chooser_.leading(static_cast<int32_t>(seqs.size())) !=
                                        ModeChooser::Kind::kAlternate;
  std::vector<RoundSeq> round = spec_->plan(seqs, scheduler_.page_size(), alternate, select);
  for (Sequence *seq : scheduler_.reserve_round(round))
    finish(*seq, VEGAS_FINISH_ERROR, VEGAS_ERR_KV_FULL);
  if (round.empty()) return 0;
  std::vector<RoundOutcome> outcomes = spec_->round(round, *context_, alternate, select);
  // Every sequence's RNG and round counts first: a callback of the commits
  // that follow sees the round counted.
  for (const RoundOutcome &o : outcomes) begin_outcome(o);
  int64_t committed = 0;
  for (RoundOutcome &o : outcomes) committed += commit_outcome(o);
  spec_->end_round(outcomes, *context_);
  for (const RoundOutcome &o : outcomes) {
    o.seq->stats.committed += o.committed;
    record_tuning(*o.seq);  // as end_round's observation of the round left it
  }
  return committed;
}

int64_t Session::commit_outcome(RoundOutcome &o) {
  Sequence &seq = *o.seq;
  for (size_t r = 0; r < o.tokens.size() && !seq.finished(); ++r) {
    commit_token(seq, o.tokens[r], o.rows[r]);
    ++o.committed;
  }
  if (!seq.finished()) scheduler_.settle(seq, o.kv_len);
  return o.committed;
}

void Session::record_tuning(Sequence &seq) {
  const SequenceTuning *tuning = spec_->sequence_tuning(seq.id);
  if (tuning == nullptr) return;  // forgotten (finished): the last copy stays
  seq.stats.gamma = tuning->gamma;
  seq.stats.ratio = tuning->ratio;
  seq.stats.switches = tuning->switches;
}

void Session::run() {
  while (step() > 0) {
  }
}

}  // namespace vegas
