// SerialWorker (common/serial_worker.h): tasks run one at a time on one
// thread other than the caller's, in the order given; a task's exception
// reaches its future; the destructor runs what is still queued.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/serial_worker.h"

namespace vegas {
namespace {

TEST(SerialWorker, RunsTasksInOrderOneAtATimeOnOneOtherThread) {
  std::vector<int> order;
  std::set<std::thread::id> threads;
  std::atomic<int> running{0}, most{0};
  std::vector<std::future<void>> done;
  {
    SerialWorker w;
    for (int i = 0; i < 50; ++i)
      done.push_back(w.submit([&, i] {
        most = std::max(most.load(), ++running);
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        order.push_back(i);  // one writer at a time, or the test sees a race (ASan/TSan)
        threads.insert(std::this_thread::get_id());
        --running;
      }));
    done.back().wait();
    ASSERT_EQ(order.size(), 50u);
  }
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[size_t(i)], i);
  EXPECT_EQ(most.load(), 1);
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_NE(*threads.begin(), std::this_thread::get_id());
}

TEST(SerialWorker, ExceptionsReachTheFutureAndLaterTasksStillRun) {
  SerialWorker w;
  std::future<void> bad = w.submit([] { throw std::runtime_error("task failed"); });
  bool ran = false;
  std::future<void> good = w.submit([&] { ran = true; });
  EXPECT_THROW(bad.get(), std::runtime_error);
  good.get();
  EXPECT_TRUE(ran);
}

TEST(SerialWorker, DestructorRunsWhatIsQueued) {
  std::atomic<int> count{0};
  {
    SerialWorker w;
    for (int i = 0; i < 20; ++i)
      w.submit([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        ++count;
      });
  }
  EXPECT_EQ(count.load(), 20);
  SerialWorker unused;  // never started: destroys without a thread
}

}  // namespace
}  // namespace vegas
