// Runs independent per-row host work (building sampling distributions,
// acceptance) on the library's worker threads (common/worker_pool.h). With a GPU backend this host
// work is on the critical path of every step: 16 sequences x (gamma + 1) verify rows built one
// after another cost milliseconds, far more than the device step itself.
// Exceptions thrown by `fn` are caught in the workers and the first one is
// rethrown on the calling thread (none may leave an OpenMP region).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>

#include "common/worker_pool.h"

namespace vegas {

// `worth_threads` false runs the rows on the calling thread: for rows of a
// few microseconds, waking sleeping workers costs more than the rows (with
// OpenMP's passive waiting a speculative round's seven regions took ~0.3 ms of
// wall time for ~0.08 ms of work, bench_session_host).
inline void parallel_rows(int64_t n, const std::function<void(int64_t)> &fn,
                          bool worth_threads = true) {
  std::exception_ptr first;
  std::mutex m;
  parallel_ranges(n, worth_threads ? hardware_threads() : 1, 1,
                  [&](int64_t begin, int64_t end, int) {
                    for (int64_t i = begin; i < end; ++i) {
                      try {
                        fn(i);
                      } catch (...) {
                        std::lock_guard<std::mutex> lock(m);
                        if (!first) first = std::current_exception();
                      }
                    }
                  });
  if (first) std::rethrow_exception(first);
}

}  // namespace vegas
