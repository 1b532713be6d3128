#include "engine.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

namespace vegas_server {

namespace {

// Inside the library's callback nothing may throw: a piece that cannot be
// read (a bug) is spelled empty.
std::string token_piece(const PromptFormat &format, int32_t id) {
  try {
    return format.piece(id);
  } catch (const std::exception &) {
    return std::string();
  }
}

// The entries of the tokens committed since the last call (an eos or stop id
// has none).
std::vector<TokenLogprobs> new_logprobs(GenerationJob::LogprobsSource &src, int32_t seq_id) {
  std::vector<TokenLogprobs> out;
  vegas_token_logprobs lp;
  lp.struct_size = sizeof lp;
  while (vegas_sequence_get_logprobs(src.session, seq_id, src.next, &lp) == VEGAS_OK) {
    ++src.next;
    TokenLogprobs e;
    e.chosen = {lp.token, token_piece(*src.format, lp.token), lp.logprob};
    for (int32_t i = 0; i < lp.n_top && i < VEGAS_MAX_TOP_LOGPROBS; ++i)
      e.top.push_back({lp.top_ids[i], token_piece(*src.format, lp.top_ids[i]), lp.top_logprobs[i]});
    out.push_back(std::move(e));
  }
  return out;
}

// Runs on the decode thread inside vegas_session_step for every committed token.
int32_t on_token(int32_t seq_id, int32_t, const char *piece, size_t piece_len, void *user_data) {
  auto *job = static_cast<GenerationJob *>(user_data);
  job->append(piece, piece_len,
              job->params().logprobs ? new_logprobs(job->logprobs_source(), seq_id)
                                     : std::vector<TokenLogprobs>());
  return job->cancel_requested() ? 1 : 0;  // a departed client stops its sequence at once
}

std::string last_error(const char *what, vegas_status status) {
  return std::string(what) + ": " + vegas_status_name(status) + ": " + vegas_last_error();
}

}  // namespace

Engine::Engine(vegas_session *session, const PromptFormat *format, int32_t parallel,
               int32_t max_queue, Metrics *metrics)
    : session_(session),
      format_(format),
      parallel_(parallel),
      max_queue_(static_cast<size_t>(max_queue)),
      metrics_(metrics),
      thread_([this] { run(); }) {}

Engine::~Engine() {
  stop();
  vegas_session_free(session_);
}

Engine::Admission Engine::submit(std::shared_ptr<GenerationJob> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return Admission::kStopping;
    const size_t free_slots =
        static_cast<size_t>(parallel_) - std::min(slots_used_, static_cast<size_t>(parallel_));
    if (queue_.size() >= max_queue_ + free_slots) return Admission::kQueueFull;
    queue_.push_back(std::move(job));
    metrics_->queued.store(static_cast<int64_t>(queue_.size()));
  }
  cv_.notify_one();
  return Admission::kAccepted;
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Engine::admit(std::shared_ptr<GenerationJob> job) {
  const GenerationParams &p = job->params();
  if (job->cancel_requested()) {  // gone while it waited in the queue
    metrics_->sequences_cancelled.fetch_add(1);
    metrics_->sequences_finished.fetch_add(1);
    GenerationResult r;
    r.finish_reason = VEGAS_FINISH_CANCELLED;
    job->finish(r);
    return;
  }
  std::vector<const char *> stops;
  for (const std::string &s : p.stop_strings) stops.push_back(s.c_str());
  vegas_request req;
  vegas_request_init(&req);
  req.prompt = p.prompt.data();
  req.n_prompt = p.prompt.size();
  req.sampling = &p.sampling;
  req.max_tokens = p.max_tokens;
  req.ignore_eos = p.ignore_eos;
  req.stop_ids = p.stop_ids.empty() ? nullptr : p.stop_ids.data();
  req.n_stop_ids = p.stop_ids.size();
  req.stop_strings = stops.empty() ? nullptr : stops.data();
  req.n_stop_strings = stops.size();
  req.on_token = on_token;
  req.logprobs = !p.logprobs            ? VEGAS_LOGPROBS_OFF
                 : p.processed_logprobs ? VEGAS_LOGPROBS_PROCESSED
                                        : VEGAS_LOGPROBS_RAW;
  req.top_logprobs = p.top_logprobs;
  job->logprobs_source() = {session_, format_, 0};
  req.user_data = job.get();  // the job outlives the sequence: active_ holds it until release
  int32_t seq = -1;
  const vegas_status st = vegas_session_submit(session_, &req, &seq);
  if (st != VEGAS_OK) {
    GenerationResult r;
    r.finish_reason = VEGAS_FINISH_ERROR;
    r.status = st;
    r.error = last_error("submitting the request", st);
    r.at_submit = true;
    metrics_->sequences_failed.fetch_add(1);
    metrics_->sequences_finished.fetch_add(1);
    job->finish(r);
    return;
  }
  metrics_->prompt_tokens.fetch_add(static_cast<int64_t>(p.prompt.size()));
  active_.push_back(Active{std::move(job), seq, false, 0});
}

Engine::StepTally Engine::collect_finished() {
  StepTally tally;
  for (size_t i = 0; i < active_.size();) {
    Active &a = active_[i];
    vegas_sequence_info info;
    info.struct_size = sizeof(info);
    vegas_status st = vegas_sequence_get_info(session_, a.seq_id, &info);
    if (st == VEGAS_OK) {
      // No token before this step: the step prefilled (part of) its prompt.
      tally.prefilling = tally.prefilling || a.generated == 0;
      tally.tokens += info.n_generated - a.generated;
      a.generated = info.n_generated;
    }
    if (st == VEGAS_OK && info.finish_reason == VEGAS_FINISH_NONE) {
      ++i;
      continue;
    }
    GenerationResult r;
    if (st != VEGAS_OK) {
      r.finish_reason = VEGAS_FINISH_ERROR;
      r.status = st;
      r.error = last_error("reading the sequence", st);
    } else {
      r.finish_reason = info.finish_reason;
      r.status = info.status;
      r.n_prompt = info.n_prompt;
      r.n_generated = info.n_generated;
      if (info.finish_reason == VEGAS_FINISH_ERROR)
        r.error = std::string("decoding failed: ") +
                  vegas_status_name(static_cast<vegas_status>(info.status));
    }
    const bool cancelled =
        a.job->cancel_requested() &&
        (r.finish_reason == VEGAS_FINISH_CANCELLED || r.finish_reason == VEGAS_FINISH_CALLBACK);
    if (cancelled) r.finish_reason = VEGAS_FINISH_CANCELLED;
    metrics_->generated_tokens.fetch_add(r.n_generated);
    metrics_->sequences_finished.fetch_add(1);
    if (cancelled) metrics_->sequences_cancelled.fetch_add(1);
    if (r.finish_reason == VEGAS_FINISH_ERROR) metrics_->sequences_failed.fetch_add(1);
    vegas_sequence_release(session_, a.seq_id);
    a.job->finish(std::move(r));
    active_[i] = std::move(active_.back());
    active_.pop_back();
  }
  metrics_->active.store(static_cast<int64_t>(active_.size()));
  return tally;
}

void Engine::fail_all(const std::string &message, vegas_status status) {
  for (Active &a : active_) {
    GenerationResult r;
    r.finish_reason = VEGAS_FINISH_ERROR;
    r.status = status;
    r.error = message;
    vegas_sequence_release(session_, a.seq_id);
    metrics_->sequences_failed.fetch_add(1);
    metrics_->sequences_finished.fetch_add(1);
    a.job->finish(std::move(r));
  }
  active_.clear();
  metrics_->active.store(0);
}

void Engine::run() {
  for (;;) {
    std::vector<std::shared_ptr<GenerationJob>> incoming;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !active_.empty(); });
      stopping = stopping_;
      slots_used_ = active_.size();
      while (!queue_.empty() && slots_used_ < static_cast<size_t>(parallel_)) {
        incoming.push_back(std::move(queue_.front()));
        queue_.pop_front();
        ++slots_used_;
      }
      if (stopping)  // refuse what still waits: nobody will decode it
        while (!queue_.empty()) {
          queue_.front()->cancel();
          incoming.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      metrics_->queued.store(static_cast<int64_t>(queue_.size()));
    }
    for (auto &job : incoming) admit(std::move(job));
    if (stopping)
      for (Active &a : active_) a.job->cancel();
    for (Active &a : active_)
      if (a.job->cancel_requested() && !a.cancel_sent) {
        vegas_session_cancel(session_, a.seq_id);
        a.cancel_sent = true;
      }
    metrics_->active.store(static_cast<int64_t>(active_.size()));
    if (!active_.empty()) {
      const auto t0 = std::chrono::steady_clock::now();
      const vegas_status st = vegas_session_step(session_, nullptr);
      // Read before vegas_session_get_stats, which clears the thread's last error.
      const std::string step_error = st != VEGAS_OK ? last_error("decoding step", st) : "";
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      vegas_session_stats stats;
      stats.struct_size = sizeof(stats);
      if (vegas_session_get_stats(session_, &stats) != VEGAS_OK) stats = vegas_session_stats{};
      StepTally tally;
      tally.prefilling = true;  // a failed step counts as no decoding
      if (st != VEGAS_OK)
        fail_all(step_error, st);
      else
        tally = collect_finished();
      metrics_->record_step(seconds, stats, tally.tokens, tally.prefilling);
      int64_t hit = 0, evicted = 0;
      if (vegas_session_get_cache_stats(session_, &hit, &evicted) == VEGAS_OK) {
        metrics_->prefix_hit_tokens.store(hit);
        metrics_->prefix_evicted_pages.store(evicted);
      }
    }
    if (stopping && active_.empty()) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.empty()) return;
    }
  }
}

}  // namespace vegas_server
