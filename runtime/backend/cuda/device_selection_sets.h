// The KV sets selected on the device (kernels/kv_select.cuh) for CudaContext:
// one record slot per key (a sequence), the selection requests of a step and
// the deferred ones (specextend: the row to select from is known only after
// acceptance), and the selection's device time. Draft passes read the records
// through the address records() gives; it moves when the slots grow, and
// offset() says so (graphs holding it must then be captured again).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/device_buffer.h"
#include "kv_select.cuh"

namespace vegas::cuda {

class DeviceSelectionSets {
 public:
  // Records of n_layers sets of up to `positions` positions each.
  DeviceSelectionSets(int32_t n_layers, int64_t positions);
  ~DeviceSelectionSets();
  DeviceSelectionSets(const DeviceSelectionSets &) = delete;
  DeviceSelectionSets &operator=(const DeviceSelectionSets &) = delete;

  int32_t *records() { return records_.get<int32_t>(); }
  int32_t stride() const { return stride_; }

  // The record offset of key's set, a slot made on first use; *moved is set
  // when that grew the records (their address changed). Synchronises `stream`
  // then.
  int32_t offset(int32_t key, cudaStream_t stream, bool *moved);
  // The offset of key's set, or -1 when no step selected one.
  int64_t find(int32_t key) const;
  void forget(int32_t key);

  // A step is staged: its requests start empty; a step that captures scores
  // overwrites the captures deferred requests point into, so they are dropped
  // and the step's capture shape is kept for later deferred ones.
  void begin_step(bool captures, int32_t cap_slots, int32_t cap_stride);
  void request(int32_t key, const kernels::KvSelectDesc &d, bool deferred);

  // Captured scores, as paged attention writes them.
  struct Captures {
    const kernels::f16 *logits = nullptr;
    const float *lse = nullptr;
    int32_t slots = 0;
    int32_t stride = 0;
  };
  // Runs the step's requests over its captures (nothing when none).
  void launch_step(cudaStream_t stream, const kernels::f16 *cap_logits, const float *cap_lse,
                   int32_t cap_slots, int32_t cap_stride, int32_t n_layers, int32_t n_heads);
  // Runs the deferred requests of `items` from their named rows.
  void launch_deferred(cudaStream_t stream,
                       const std::vector<BackendContext::DeferredSelect> &items,
                       const kernels::f16 *cap_logits, const float *cap_lse, int32_t n_layers,
                       int32_t n_heads);
  // Device time of the selections since the last call, without waiting for
  // one still running (it counts at the next call).
  double take_seconds();

 private:
  void launch(cudaStream_t stream, const std::vector<kernels::KvSelectDesc> &descs,
              const Captures &cap, int32_t n_layers, int32_t n_heads);
  void collect_time();

  int32_t stride_ = 0;  // positions per layer in a record
  int64_t words_ = 0;   // ints of one record slot
  DeviceBuffer records_, keys_, desc_;
  PinnedBuffer desc_host_;
  std::map<int32_t, int32_t> slot_;  // key -> slot
  std::vector<int32_t> free_;
  int32_t slots_ = 0;
  std::vector<kernels::KvSelectDesc> step_;
  // Deferred requests of the last capture step, by key, with its capture shape.
  std::map<int32_t, kernels::KvSelectDesc> deferred_;
  int32_t deferred_slots_ = 0, deferred_stride_ = 0;
  cudaEvent_t begin_ = nullptr, end_ = nullptr;
  bool timed_ = false;  // an event pair is recorded and not yet read
  double seconds_ = 0.0;
};

}  // namespace vegas::cuda
