// The library's own worker threads for data-parallel loops (the CPU backend's
// kernels, a round's per-sequence host work), in place of OpenMP's team.
//
// Why not OpenMP: libgomp's idle threads spin for ~300,000 iterations before
// they sleep, and how long is fixed by OMP_WAIT_POLICY / GOMP_SPINCOUNT when
// the library loads, which a host program cannot be asked to set. On a machine
// whose cores are busy (an IDE beside a compiler) the spinning workers took
// the cores from the thread with the work, and CPU decoding crawled. Here an
// idle worker polls briefly, yielding its core (a loop's next region usually
// follows within microseconds), then sleeps on a condition variable.
#pragma once

#include <cstdint>
#include <functional>

namespace vegas {

// The number of hardware threads (at least 1): the default thread count.
int hardware_threads();

// A thread count as the load options give it: n_threads, or hardware_threads() for 0.
int threads_or_hardware(int32_t n_threads);

// Runs fn(begin, end, thread) over [0, n) cut into ranges, on up to n_threads
// threads (the calling thread is thread 0 and always takes part; thread < the
// number used, for per-thread scratch). grain 0: one contiguous range per
// thread (static); grain g > 0: ranges of g indices handed out in order as
// threads come for them (dynamic, for uneven work). Returns once every range
// ran. n_threads <= 1, n <= grain, a loop started inside a loop, or a pool
// busy with another caller's loop (another thread's session): the caller
// runs everything, as one range.
// fn must not throw.
void parallel_ranges(int64_t n, int n_threads, int64_t grain,
                     const std::function<void(int64_t begin, int64_t end, int thread)> &fn);

}  // namespace vegas
