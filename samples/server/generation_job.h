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

#include "prompt_format.h"
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
  // Each generated token's log-probability and `top_logprobs` alternatives.
  bool logprobs = false;
  int32_t top_logprobs = 0;
  bool processed_logprobs = false;  // llama.cpp's post_sampling_probs
};

// One token of a logprobs answer: its id, its text (bytes, maybe part of a
// UTF-8 character) and its log-probability.
struct TokenProb {
  int32_t id = 0;
  std::string piece;
  float logprob = 0.0f;
};

// A generated token's log-probability and its most probable alternatives.
struct TokenLogprobs {
  TokenProb chosen;
  std::vector<TokenProb> top;
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

  // `logprobs`: the entries of the tokens committed with this text.
  void append(const char *text, size_t len, std::vector<TokenLogprobs> logprobs = {}) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.append(text, len);
      for (TokenLogprobs &lp : logprobs) pending_logprobs_.push_back(std::move(lp));
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
  // With `logprobs`, the entries produced so far move there too.
  bool wait_for_text(std::string *text, std::chrono::milliseconds timeout,
                     std::vector<TokenLogprobs> *logprobs = nullptr) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, timeout,
                 [&] { return !pending_.empty() || !pending_logprobs_.empty() || finished_; });
    text->clear();
    text->swap(pending_);
    bool moved = false;
    if (logprobs != nullptr) {
      logprobs->clear();
      logprobs->swap(pending_logprobs_);
      moved = !logprobs->empty();
    }
    return !(finished_ && text->empty() && !moved);
  }

  // Decode thread only: where its sequence's logprobs are read from, and the
  // next entry to read.
  struct LogprobsSource {
    const vegas_session *session = nullptr;
    const PromptFormat *format = nullptr;  // spells the tokens
    int64_t next = 0;
  };
  LogprobsSource &logprobs_source() { return logprobs_source_; }

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
  std::vector<TokenLogprobs> pending_logprobs_;
  LogprobsSource logprobs_source_;
  bool finished_ = false;
  GenerationResult result_;
  std::atomic<bool> cancel_requested_{false};
};

}  // namespace vegas_server
