// One background thread that runs tasks one at a time, in the order given
// (a session's prompt lookup indexes, built while the device prefills). One
// thread however many sequences arrive: a host program (an IDE, a game) is
// not handed a thread per request.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace vegas {

class SerialWorker {
 public:
  SerialWorker() = default;
  SerialWorker(const SerialWorker &) = delete;
  SerialWorker &operator=(const SerialWorker &) = delete;
  // Runs what is queued, then joins the thread.
  ~SerialWorker();

  // Queues `task` (the thread starts with the first one). The future is ready
  // once it ran, and holds what it threw.
  std::future<void> submit(std::function<void()> task);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace vegas
