// Captured CUDA graphs of decode steps and verification passes, keyed by
// launch shape (padded sequences and rows, attention splits, whether the step
// samples, whether it drafts with quest, whether every sequence drafts from a
// selected set, the most rows of a sequence, a verification pass's keys
// bucket, its capture slots and score stride). A shape is captured the second time it is seen,
// after one eager run has created the cuBLASLt plans it uses, and replayed from then on; past
// kMaxGraphs shapes, new ones run eagerly.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <tuple>

namespace vegas::cuda {

class DeviceGraphs {
 public:
  // Padded sequences, attention splits, argmax, quest, sparse, padded rows,
  // the most rows of a sequence, a verification pass's key bucket, capture
  // slots and score stride.
  using Key =
      std::tuple<int32_t, int32_t, bool, bool, bool, int32_t, int32_t, int32_t, int32_t, int32_t>;
  static constexpr size_t kMaxGraphs = 512;
  DeviceGraphs() = default;
  DeviceGraphs(const DeviceGraphs &) = delete;
  DeviceGraphs &operator=(const DeviceGraphs &) = delete;
  ~DeviceGraphs() { clear(); }

  // Runs `enqueue` on `stream`: eagerly the first time `key` is seen, then
  // captured once into a graph that is replayed on every later call.
  void run(const Key &key, cudaStream_t stream, const std::function<void()> &enqueue);
  void clear();
  size_t size() const { return execs_.size(); }

 private:
  std::map<Key, cudaGraphExec_t> execs_;
  std::map<Key, int> seen_;
};

}  // namespace vegas::cuda
