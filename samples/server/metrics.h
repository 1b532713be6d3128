// Counters of the server, rendered as Prometheus text for GET /metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "vegas.h"

namespace vegas_server {

class Metrics {
 public:
  // HTTP side.
  std::atomic<int64_t> requests_accepted{0};  // handed to the decode thread
  std::atomic<int64_t> requests_rejected{0};  // 503: the queue was full
  std::atomic<int64_t> requests_invalid{0};   // 4xx answers
  std::atomic<int64_t> requests_unauthorized{0};

  // Decode side (written by the decode thread only).
  std::atomic<int64_t> prompt_tokens{0};
  std::atomic<int64_t> generated_tokens{0};
  std::atomic<int64_t> sequences_finished{0};
  std::atomic<int64_t> sequences_cancelled{0};  // the client disconnected
  std::atomic<int64_t> sequences_failed{0};
  std::atomic<int64_t> steps{0};
  std::atomic<int64_t> active{0};                // sequences in the session now
  std::atomic<int64_t> queued{0};                // waiting for a slot
  std::atomic<int64_t> prefix_hit_tokens{0};     // prompt tokens served from cached KV
  std::atomic<int64_t> prefix_evicted_pages{0};  // cached KV pages taken back

  // Called by the decode thread after each step: its wall time, the session's
  // statistics, the tokens it generated and whether a prompt was prefilled in it.
  void record_step(double seconds, const vegas_session_stats &stats, int64_t tokens,
                   bool prefilling);

  std::string render_prometheus(const std::string &mode) const;

 private:
  mutable std::mutex mutex_;
  double busy_seconds_ = 0;    // wall time spent inside vegas_session_step
  double decode_seconds_ = 0;  // ... in steps without prefill
  int64_t decode_tokens_ = 0;  // tokens generated in those steps
  vegas_session_stats stats_{};
};

}  // namespace vegas_server
