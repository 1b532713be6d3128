#include "common/worker_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <pthread.h>

namespace vegas {

namespace {

using Fn = std::function<void(int64_t, int64_t, int)>;

// Whether this thread is inside a loop of the pool (its caller or a worker):
// a loop started there runs on the thread itself.
thread_local bool in_loop = false;
using Clock = std::chrono::steady_clock;

// How long an idle thread polls before it sleeps: loops of a forward pass
// follow each other within microseconds, a round's host loops within a step.
// Polling yields the core, so a thread whose work was preempted gets it back.
constexpr auto kPoll = std::chrono::microseconds(200);

// Polls `ready` (yielding the core) for up to kPoll; true when it came.
template <typename Ready>
bool poll_for(const Ready &ready) {
  const auto until = Clock::now() + kPoll;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 15) == 15) {
      if (Clock::now() > until) return false;
      std::this_thread::yield();
    }
  }
}

// A loop is cut into pieces (one per thread when static, of `grain` indices
// when dynamic) that whoever comes first claims: the caller and the workers
// alike. A worker that wakes late finds them taken, so the caller never waits
// for a thread that has not begun, only for pieces being run.
class Pool {
 public:
  // Never destroyed: workers may outlive static teardown. A forked child has
  // none of the parent's workers, so it starts a pool of its own.
  static Pool &get() {
    static const bool registered = [] {
      pthread_atfork(nullptr, nullptr, [] { current() = new Pool; });
      return true;
    }();
    (void)registered;
    return *current();
  }

  // False (nothing ran) when another caller's loop holds the pool.
  bool run(int64_t n, int used, int64_t grain, const Fn &fn) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    grow(used - 1);
    fn_ = &fn;
    n_ = n;
    grain_ = grain;
    // Static loops: a few contiguous pieces per thread, so that a thread
    // preempted in the middle of one holds back little of the loop.
    const int64_t pieces =
        grain == 0 ? std::min<int64_t>(n, int64_t{kStaticPieces} * used) : (n + grain - 1) / grain;
    done_.store(0, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(m_);
      generation_ = (generation_of(claim_.load(std::memory_order_relaxed)) + 1) & kGenMask;
      // Thread numbers 1 .. used - 1 for the workers that come first (the caller is 0).
      slots_.store(generation_ << kSlotGenShift | static_cast<uint64_t>(used) << kSlotBits | 1,
                   std::memory_order_relaxed);
      // Published last: claims of this loop start from here.
      claim_.store(generation_ << kGenShift | static_cast<uint64_t>(pieces) << kPieceBits,
                   std::memory_order_release);
    }
    wake_.notify_all();
    in_loop = true;
    run_pieces(generation_, 0);
    in_loop = false;
    const auto done = [&] { return done_.load(std::memory_order_acquire) == pieces; };
    if (!poll_for(done)) {
      std::unique_lock<std::mutex> lock(m_);
      finished_.wait(lock, done);
    }
    return true;
  }

 private:
  // claim_ = generation << 44 | pieces << 22 | the next unclaimed piece: one
  // word, so a claim checks the loop it belongs to and its end at once.
  static constexpr int kPieceBits = 22, kGenShift = 2 * kPieceBits;
  static constexpr uint64_t kPieceMask = (uint64_t{1} << kPieceBits) - 1;
  static constexpr uint64_t kGenMask = (uint64_t{1} << (64 - kGenShift)) - 1;
  static uint64_t generation_of(uint64_t word) { return word >> kGenShift; }
  static constexpr int kStaticPieces = 4;
  // slots_ = generation << 24 | threads of the loop << 12 | thread numbers given.
  static constexpr int kSlotBits = 12, kSlotGenShift = 2 * kSlotBits;
  static constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;

  // A thread number of loop `generation` for a worker (below the loop's thread
  // count, so per-thread scratch sized for it holds), or 0 when none is left.
  int take_slot(uint64_t generation) {
    uint64_t word = slots_.load(std::memory_order_acquire);
    for (;;) {
      if (word >> kSlotGenShift != generation) return 0;
      const uint64_t used = word >> kSlotBits & kSlotMask, given = word & kSlotMask;
      if (given >= used) return 0;
      if (slots_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
        return static_cast<int>(given);
    }
  }

  void grow(int workers) {
    while (static_cast<int>(threads_.size()) < workers) {
      const uint64_t before = generation_of(claim_.load(std::memory_order_relaxed));
      threads_.emplace_back([this, before] { work(before); });
      threads_.back().detach();
    }
  }

  void work(uint64_t seen) {
    in_loop = true;
    for (;;) {
      const auto moved = [&] {
        return generation_of(claim_.load(std::memory_order_acquire)) != seen;
      };
      if (!poll_for(moved)) {
        std::unique_lock<std::mutex> lock(m_);
        wake_.wait(lock, moved);
      }
      seen = generation_of(claim_.load(std::memory_order_acquire));
      const int thread = take_slot(seen);
      if (thread > 0) run_pieces(seen, thread);
    }
  }

  // Claims and runs pieces of loop `generation` until none is left (or the
  // loop is over). A claim that succeeds orders the loop's fields before it.
  void run_pieces(uint64_t generation, int thread) {
    for (;;) {
      uint64_t word = claim_.load(std::memory_order_acquire);
      int64_t piece = 0;
      for (;;) {
        if (generation_of(word) != generation) return;
        piece = static_cast<int64_t>(word & kPieceMask);
        if (piece >= static_cast<int64_t>(word >> kPieceBits & kPieceMask)) return;
        if (claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel,
                                         std::memory_order_acquire))
          break;
      }
      const int64_t pieces = static_cast<int64_t>(word >> kPieceBits & kPieceMask);
      const int64_t begin = grain_ == 0 ? n_ * piece / pieces : piece * grain_;
      const int64_t end = grain_ == 0 ? n_ * (piece + 1) / pieces : std::min(n_, begin + grain_);
      if (begin < end) (*fn_)(begin, end, thread);
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == pieces) {
        std::lock_guard<std::mutex> lock(m_);
        finished_.notify_one();
      }
    }
  }

  static Pool *&current() {
    static Pool *pool = new Pool;
    return pool;
  }

  std::mutex busy_;  // one loop at a time
  std::mutex m_;     // with the condition variables: sleeping and waking
  std::condition_variable wake_, finished_;
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint64_t> slots_{0};
  std::atomic<int64_t> done_{0};  // pieces of the loop run to their end
  uint64_t generation_ = 0;       // the caller's (under busy_)
  // The loop, written before claim_ moves to it (release) and read by
  // whoever claims one of its pieces (acquire); unchanged until all are done.
  const Fn *fn_ = nullptr;
  int64_t n_ = 0, grain_ = 0;
};

}  // namespace

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int threads_or_hardware(int32_t n_threads) {
  return n_threads > 0 ? n_threads : hardware_threads();
}

void parallel_ranges(int64_t n, int n_threads, int64_t grain, const Fn &fn) {
  if (n <= 0) return;
  if (in_loop) {
    fn(0, n, 0);
    return;
  }
  const int64_t pieces = grain == 0 ? n : (n + grain - 1) / grain;
  constexpr int kMaxThreads = 1024;  // fits the slot word
  const int used =
      static_cast<int>(std::min<int64_t>(std::clamp(n_threads, 1, kMaxThreads), pieces));
  constexpr int64_t kMaxPieces = int64_t{1} << 21;  // fits a claim word
  if (pieces >= kMaxPieces) grain = (n + kMaxPieces - 1) / kMaxPieces;
  if (used <= 1 || !Pool::get().run(n, used, grain, fn)) fn(0, n, 0);
}

}  // namespace vegas
