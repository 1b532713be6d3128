#include "metrics.h"

#include <sstream>

namespace vegas_server {

namespace {

void emit(std::ostringstream &out, const char *name, const char *type, const char *help,
          double value) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
      << name << ' ' << value << '\n';
}

}  // namespace

void Metrics::record_step(double seconds, const vegas_session_stats &stats, int64_t tokens,
                          bool prefilling) {
  std::lock_guard<std::mutex> lock(mutex_);
  busy_seconds_ += seconds;
  if (!prefilling) {
    decode_seconds_ += seconds;
    decode_tokens_ += tokens;
  }
  stats_ = stats;
  steps.fetch_add(1, std::memory_order_relaxed);
}

std::string Metrics::render_prometheus(const std::string &mode) const {
  double busy, decode_seconds;
  int64_t decode_tokens;
  vegas_session_stats s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    busy = busy_seconds_;
    decode_seconds = decode_seconds_;
    decode_tokens = decode_tokens_;
    s = stats_;
  }
  const double generated = static_cast<double>(generated_tokens.load());
  std::ostringstream out;
  out.precision(10);
  out << "# HELP vegas_info The decoding mode of the server.\n# TYPE vegas_info gauge\n"
      << "vegas_info{mode=\"" << mode << "\",version=\"" << vegas_version() << "\"} 1\n";
  emit(out, "vegas_requests_total", "counter", "Generation requests accepted.",
       static_cast<double>(requests_accepted.load()));
  emit(out, "vegas_requests_rejected_total", "counter", "Requests refused with 503 (queue full).",
       static_cast<double>(requests_rejected.load()));
  emit(out, "vegas_requests_invalid_total", "counter", "Requests answered with a 4xx status.",
       static_cast<double>(requests_invalid.load()));
  emit(out, "vegas_requests_unauthorized_total", "counter", "Requests with a missing or wrong key.",
       static_cast<double>(requests_unauthorized.load()));
  emit(out, "vegas_prompt_tokens_total", "counter", "Prompt tokens of started sequences.",
       static_cast<double>(prompt_tokens.load()));
  emit(out, "vegas_generated_tokens_total", "counter", "Tokens generated.", generated);
  emit(out, "vegas_sequences_finished_total", "counter", "Sequences that ended, for any reason.",
       static_cast<double>(sequences_finished.load()));
  emit(out, "vegas_sequences_cancelled_total", "counter",
       "Sequences cancelled because their client went away.",
       static_cast<double>(sequences_cancelled.load()));
  emit(out, "vegas_sequences_failed_total", "counter", "Sequences that ended with an error.",
       static_cast<double>(sequences_failed.load()));
  emit(out, "vegas_sequences_active", "gauge", "Sequences decoding now.",
       static_cast<double>(active.load()));
  emit(out, "vegas_requests_queued", "gauge", "Requests waiting for a decoding slot.",
       static_cast<double>(queued.load()));
  emit(out, "vegas_steps_total", "counter", "Decoding steps of the session.",
       static_cast<double>(steps.load()));
  emit(out, "vegas_busy_seconds_total", "counter", "Wall time spent in decoding steps.", busy);
  emit(out, "vegas_decode_seconds_total", "counter",
       "Wall time of the steps that prefilled no prompt.", decode_seconds);
  // Prefill time left out: a long prompt's chunks generate nothing, and counting
  // them made this a mix of prompt and decode speed.
  emit(out, "vegas_tokens_per_second", "gauge",
       "Decode rate: tokens generated in steps without prefill, per second of those steps.",
       decode_seconds > 0 ? static_cast<double>(decode_tokens) / decode_seconds : 0.0);
  emit(out, "vegas_prefix_cache_hit_tokens_total", "counter",
       "Prompt tokens served from the prefix cache instead of prefilled.",
       static_cast<double>(prefix_hit_tokens.load()));
  emit(out, "vegas_prefix_cache_evicted_pages_total", "counter",
       "Cached KV pages taken back for new tokens.",
       static_cast<double>(prefix_evicted_pages.load()));
  emit(out, "vegas_spec_rounds_total", "counter", "Draft-verify rounds (vegas mode).",
       static_cast<double>(s.rounds));
  emit(out, "vegas_spec_drafted_total", "counter", "Draft tokens proposed (vegas mode).",
       static_cast<double>(s.drafted));
  emit(out, "vegas_spec_accepted_total", "counter", "Draft tokens accepted (vegas mode).",
       static_cast<double>(s.accepted));
  emit(out, "vegas_spec_tau", "gauge", "Committed tokens per draft-verify round (tau).",
       s.tokens_per_round);
  emit(out, "vegas_spec_acceptance_rate", "gauge", "Accepted / drafted tokens.",
       s.drafted > 0 ? static_cast<double>(s.accepted) / static_cast<double>(s.drafted) : 0.0);
  return out.str();
}

}  // namespace vegas_server
