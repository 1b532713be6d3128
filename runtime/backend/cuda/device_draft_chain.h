// The device side of a round's chain of draft passes (CudaContext::
// begin_draft_chain): each pass's staged fields and sampling rules, every
// pass's draws and logit candidates on the device and their download, and
// the feed of a verification pass whose draft rows take the chain's draws.
// CudaContext stages and launches the passes; this class owns what they
// leave behind for the host.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/device_buffer.h"
#include "logit_candidates.cuh"
#include "sampling.cuh"
#include "sampling/sampling.h"

namespace vegas::cuda {

class DeviceDraftChain {
 public:
  DeviceDraftChain();
  ~DeviceDraftChain();
  DeviceDraftChain(const DeviceDraftChain &) = delete;
  DeviceDraftChain &operator=(const DeviceDraftChain &) = delete;

  // Room for `steps` passes of `n` rows, each pass's staged fields
  // `field_ints` ints (device buffers grow after a sync of `stream`); then
  // every pass's rules (draw j of each row) uploaded at once.
  void begin(int32_t steps, int32_t n, int64_t field_ints, const RowSampling *rows,
             cudaStream_t stream);
  int32_t *pass_fields(int32_t j);  // pinned: pass j's staged fields
  const kernels::SamplingRow *rules(int32_t j) const;
  int32_t *draws(int32_t j);            // device: pass j's draws, one per row
  int32_t *pass_candidates(int32_t j);  // device: pass j's candidates (CandidateLayout)
  kernels::CandidateLayout pass_layout() const { return {rows_, kMaxCandidateTopK}; }
  // After pass 0's launch (and every pass that uploads host sparse records),
  // which uploads page tables from the staging buffer a pass staged behind
  // the chain rewrites: wait_tables_read() waits for the last one marked.
  void mark_tables_read(cudaStream_t stream);
  void wait_tables_read();
  // After the last pass: the draws and candidates to the host.
  void download(cudaStream_t stream);
  // Once downloaded (waits): the draws into tokens_out [steps][n] and each
  // pass's candidates into cands; false where a row's candidates overflowed
  // (the caller runs the passes one by one). Raises the host's error for an
  // id the kernels could not draw.
  bool collect(int32_t *tokens_out, std::vector<LogitCandidates> *cands);

  // A verification pass behind the chain: row r's token is draw fed[r] of
  // the last chain (-1: the host's). check_feed before staging the pass,
  // upload_feed (on `stream`) after: the device map for StepFeed::from.
  void check_feed(const int32_t *fed, int32_t rows) const;
  const int32_t *upload_feed(const int32_t *fed, int32_t rows, cudaStream_t stream);
  // The last downloaded chain's draws [steps()][rows()] (device), which stay
  // until the next chain begins; n_draws() is 0 before any chain.
  const int32_t *all_draws() const { return out_.get<int32_t>(); }
  int32_t steps() const { return done_steps_; }
  int32_t rows() const { return done_rows_; }
  int64_t n_draws() const { return int64_t{done_steps_} * done_rows_; }

 private:
  // out_'s ints for the chain being enqueued: its draws, then each pass's candidates.
  int64_t out_ints() const { return int64_t{steps_} * (rows_ + pass_layout().ints()); }
  int32_t steps_ = 0, rows_ = 0;            // the chain being enqueued
  int32_t done_steps_ = 0, done_rows_ = 0;  // the last one downloaded
  int64_t field_ints_ = 0;
  PinnedBuffer fields_host_, rules_host_, out_host_;
  DeviceBuffer rules_, out_;  // out_: [steps][rows] draws, then each pass's candidates
  cudaEvent_t done_ = nullptr, tables_read_ = nullptr;
  DeviceBuffer feed_;  // feed(): the verify rows' draw indices
  PinnedBuffer feed_host_;
};

}  // namespace vegas::cuda
