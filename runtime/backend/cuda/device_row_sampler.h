// Row sampling on the device for CudaContext::forward_sample: every rule of
// build_distribution over whole logit rows (kernels/sampling.cuh), penalties
// included. It owns the rules and penalty edits it uploads; the host's checks
// of the rows and of the drawn ids live here too, so a bad row raises the
// error build_distribution would.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/device_buffer.h"
#include "sampling.cuh"

namespace vegas::cuda {

// The device form of n rows' rules for their draw `draws` (a sampled row's
// counter advanced by it, as the host advances its own after each draw).
void fill_sampling_rules(const RowSampling *rows, int32_t n, uint64_t draws,
                         kernels::SamplingRow *out);

// Raises the host's error for an id a sampling kernel could not draw
// (kernels::kSample*; `row` names where it came from); nothing for ids >= 0.
void check_drawn_id(int32_t token, const std::string &row);

class DeviceRowSampler {
 public:
  explicit DeviceRowSampler(int64_t max_rows);

  // Checks n rows' rules and makes their penalty edits (a bad history id
  // throws here, before any step runs). False where the device cannot draw
  // them (no rule, or penalties without a history).
  bool prepare(const RowSampling *rows, int32_t n, int32_t vocab);
  // Every prepared row greedy and without penalties: the step's own argmax
  // draws them.
  bool argmax_suffices() const { return all_greedy_ && edits_.empty(); }
  // Enqueues the prepared rows' penalties and draws over `logits` [n][vocab]
  // into `out` on `stream`.
  void enqueue(const RowSampling *rows, int32_t n, float *logits, int32_t vocab, int32_t *out,
               cudaStream_t stream);
  // The drawn ids, once downloaded: raises the host's error for a row the
  // kernel could not draw from.
  static void check_drawn(const int32_t *tokens, int32_t n);

 private:
  DeviceBuffer rules_;  // [max_rows] kernels::SamplingRow
  PinnedBuffer rules_host_;
  DeviceBuffer edits_dev_;
  PinnedBuffer edits_host_;
  std::vector<kernels::PenaltyEdit> edits_;
  std::vector<std::pair<int32_t, int32_t>> counts_;  // (id, count) of one row
  bool all_greedy_ = true;
};

}  // namespace vegas::cuda
