// The library's worker pool (common/worker_pool.h): every index of a loop runs
// exactly once, static and dynamic, with thread numbers below the count used;
// loops inside loops and loops from several threads at once run (inline
// where the pool is taken), and a forked child gets workers of its own.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "common/parallel_rows.h"
#include "common/worker_pool.h"

namespace vegas {
namespace {

// Runs a loop of n indices and checks each ran once, in ranges of the grain
// where threads share it (a thread running the loop alone takes one range).
void check_loop(int64_t n, int threads, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int> bad_thread{0}, bad_range{0};
  parallel_ranges(n, threads, grain, [&](int64_t begin, int64_t end, int thread) {
    if (thread < 0 || thread >= std::max(threads, 1)) bad_thread.fetch_add(1);
    if (threads > 1 && grain > 0 && end - begin > grain) bad_range.fetch_add(1);
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1)
        << "index " << i << " of " << n << ", threads " << threads << ", grain " << grain;
  EXPECT_EQ(bad_thread.load(), 0);
  EXPECT_EQ(bad_range.load(), 0);
}

TEST(WorkerPool, EveryIndexRunsOnce) {
  for (int threads : {1, 2, 3, 8})
    for (int64_t grain : {0, 1, 7})
      for (int64_t n : {1, 2, 5, 64, 1000, 100003}) check_loop(n, threads, grain);
  check_loop(0, 4, 0);
}

TEST(WorkerPool, ManyLoopsInARow) {
  // Workers sleep and wake between loops, or catch the next one polling.
  for (int rep = 0; rep < 2000; ++rep) check_loop(1 + rep % 37, 4, rep % 3);
}

TEST(WorkerPool, NestedLoopsRunInline) {
  std::atomic<int64_t> sum{0};
  parallel_ranges(8, 4, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i)
      parallel_ranges(100, 4, 0, [&](int64_t b, int64_t e, int thread) {
        EXPECT_EQ(thread, 0);  // the inner loop ran on the thread that asked
        sum.fetch_add(e - b);
      });
  });
  EXPECT_EQ(sum.load(), 800);
}

TEST(WorkerPool, LoopsFromSeveralThreadsAtOnce) {
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 300; ++rep) {
        const int64_t n = 50 + (rep * 7 + c) % 200;
        std::atomic<int64_t> count{0};
        parallel_ranges(n, 3, rep % 2, [&](int64_t b, int64_t e, int) { count.fetch_add(e - b); });
        if (count.load() != n) failures.fetch_add(1);
      }
    });
  for (std::thread &t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(WorkerPool, ParallelRowsRethrowsTheFirstError) {
  EXPECT_THROW(parallel_rows(100,
                             [](int64_t i) {
                               if (i == 37) throw std::runtime_error("row 37");
                             }),
               std::runtime_error);
  std::atomic<int> ran{0};
  parallel_rows(100, [&](int64_t) { ran.fetch_add(1); });
  EXPECT_EQ(ran.load(), 100);
}

TEST(WorkerPool, ForkedChildHasItsOwnWorkers) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer cannot start threads after a multi-threaded fork";
#endif
  check_loop(1000, 4, 0);  // the parent's workers exist now
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<int64_t> count{0};
    parallel_ranges(1000, 4, 1, [&](int64_t b, int64_t e, int) { count.fetch_add(e - b); });
    _exit(count.load() == 1000 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace vegas
