// One generation request on its way between an HTTP handler thread and the
// decode thread: what to generate, and the channel the text comes back through.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "vegas.h"

namespace vegas_server {

// What the request asks for, already validated and tokenized.
struct GenerationParams {
  std::vector<int32_t> prompt;
  vegas_sampling_options sampling{};
  int32_t max_tokens = 16;
  int32_t ignore_eos = 0;
  std::vector<std::string> stop_strings;
  std::vector<int32_t> stop_ids;
};

// How a finished job ended, as the decode thread saw it.
struct GenerationResult {
  int32_t finish_reason = VEGAS_FINISH_NONE;  // vegas_finish_reason
  int32_t status = VEGAS_OK;                  // vegas_status when finish_reason is ERROR
  std::string error;                          // message of a failed submit or step
  bool at_submit = false;  // the library refused the request itself (else decoding failed)
  int32_t n_prompt = 0;
  int32_t n_generated = 0;
};

// Producer: the decode thread (append, finish). Consumer: one HTTP thread
// (wait_for_text). cancel() may come from any thread.
class GenerationJob {
 public:
  explicit GenerationJob(GenerationParams params) : params_(std::move(params)) {}

  const GenerationParams &params() const { return params_; }

  void append(const char *text, size_t len) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.append(text, len);
    }
    cv_.notify_all();
  }

  void finish(GenerationResult result) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      result_ = std::move(result);
      finished_ = true;
    }
    cv_.notify_all();
  }

  // Moves the text produced so far into *text. Returns false once the job has
  // finished and every byte was handed out; waits at most `timeout` for news.
  bool wait_for_text(std::string *text, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, timeout, [&] { return !pending_.empty() || finished_; });
    text->clear();
    text->swap(pending_);
    return !(finished_ && text->empty());
  }

  // Blocks until the job has finished.
  GenerationResult wait_result() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return finished_; });
    return result_;
  }

  bool finished() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_;
  }

  // The client went away: the decode thread cancels the sequence at its next round.
  void cancel() { cancel_requested_.store(true, std::memory_order_release); }
  bool cancel_requested() const { return cancel_requested_.load(std::memory_order_acquire); }

 private:
  const GenerationParams params_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::string pending_;
  bool finished_ = false;
  GenerationResult result_;
  std::atomic<bool> cancel_requested_{false};
};

}  // namespace vegas_server
