// The decode thread: it alone drives the vegas_session. HTTP handler threads
// hand it jobs through a bounded queue; every job in a slot decodes in the same
// session step (continuous batching: a new job joins at the next step).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "generation_job.h"
#include "metrics.h"
#include "prompt_format.h"
#include "vegas.h"

namespace vegas_server {

class Engine {
 public:
  // Takes ownership of `session`. `parallel` jobs decode together; up to
  // `max_queue` more wait for a slot, beyond that submit answers kQueueFull.
  // `format` (the model's tokenizer) spells the tokens of logprobs answers.
  Engine(vegas_session *session, const PromptFormat *format, int32_t parallel, int32_t max_queue,
         Metrics *metrics);
  ~Engine();
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;

  enum class Admission { kAccepted, kQueueFull, kStopping };
  Admission submit(std::shared_ptr<GenerationJob> job);

  // Finishes every job (cancelled) and joins the decode thread.
  void stop();

 private:
  struct Active {
    std::shared_ptr<GenerationJob> job;
    int32_t seq_id = -1;
    bool cancel_sent = false;
    int32_t generated = 0;  // tokens as of the last step
  };
  // What the last step did, for the decode rate in /metrics.
  struct StepTally {
    int64_t tokens = 0;       // generated in the step
    bool prefilling = false;  // a prompt was (still) being prefilled
  };

  void run();
  void admit(std::shared_ptr<GenerationJob> job);
  StepTally collect_finished();
  void fail_all(const std::string &message, vegas_status status);

  vegas_session *session_;
  const PromptFormat *format_;
  const int32_t parallel_;
  const size_t max_queue_;
  Metrics *metrics_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GenerationJob>> queue_;  // guarded by mutex_
  bool stopping_ = false;                             // guarded by mutex_
  size_t slots_used_ = 0;  // guarded by mutex_: jobs in the session, as of the last step

  std::vector<Active> active_;  // decode thread only
  std::thread thread_;
};

}  // namespace vegas_server
