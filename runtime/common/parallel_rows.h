// Runs independent per-row host work (building sampling distributions,
// acceptance) on OpenMP threads. With a GPU backend this host work is on the
// critical path of every step: 16 sequences x (gamma + 1) verify rows built one
// after another cost milliseconds, far more than the device step itself.
// Exceptions thrown by `fn` are caught in the workers and the first one is
// rethrown on the calling thread (none may leave an OpenMP region).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>

namespace vegas {

// `worth_threads` false runs the rows on the calling thread: for rows of a
// few microseconds, waking the OpenMP team costs more than the rows (with
// OMP_WAIT_POLICY=passive a speculative round's seven regions took ~0.3 ms of
// wall time for ~0.08 ms of work, bench_session_host).
inline void parallel_rows(int64_t n, const std::function<void(int64_t)> &fn,
                          bool worth_threads = true) {
  std::exception_ptr first;
  std::mutex m;
#pragma omp parallel for schedule(dynamic, 1) if (n > 1 && worth_threads)
  for (int64_t i = 0; i < n; ++i) {
    try {
      fn(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(m);
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace vegas
