#include "backend/cuda/device_draft_chain.h"

#include <algorithm>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_row_sampler.h"
#include "common/error.h"
#include "cuda_utils.cuh"

namespace vegas::cuda {

DeviceDraftChain::DeviceDraftChain() {
  check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventCreateWithFlags(&tables_read_, cudaEventDisableTiming), "cudaEventCreate");
}

DeviceDraftChain::~DeviceDraftChain() {
  if (done_) cudaEventDestroy(done_);
  if (tables_read_) cudaEventDestroy(tables_read_);
}

void DeviceDraftChain::begin(int32_t steps, int32_t n, int64_t field_ints, const RowSampling *rows,
                             cudaStream_t stream) {
  steps_ = steps;
  rows_ = n;
  field_ints_ = field_ints;
  const int64_t out_ints = this->out_ints();
  fields_host_.reserve(steps * field_ints * sizeof(int32_t), "draft chain");
  rules_host_.reserve(steps * n * sizeof(kernels::SamplingRow), "draft chain");
  out_host_.reserve(out_ints * sizeof(int32_t), "draft chain");
  const size_t rule_bytes = static_cast<size_t>(steps) * n * sizeof(kernels::SamplingRow);
  const size_t out_bytes = static_cast<size_t>(out_ints) * sizeof(int32_t);
  if (rules_.bytes() < rule_bytes || out_.bytes() < out_bytes) {
    check(cudaStreamSynchronize(stream), "stream sync");
    rules_.allocate(std::max(rules_.bytes(), rule_bytes), "draft chain");
    out_.allocate(std::max(out_.bytes(), out_bytes), "draft chain");
  }
  // One upload for every pass: a copy between two passes stalls the stream
  // between their kernels.
  for (int32_t j = 0; j < steps; ++j)
    fill_sampling_rules(rows, n, static_cast<uint64_t>(j),
                        rules_host_.get<kernels::SamplingRow>() + int64_t{j} * n);
  check(
      cudaMemcpyAsync(rules_.get(), rules_host_.get(), rule_bytes, cudaMemcpyHostToDevice, stream),
      "upload of sampling rules");
}

int32_t *DeviceDraftChain::pass_fields(int32_t j) {
  return fields_host_.get<int32_t>() + j * field_ints_;
}

const kernels::SamplingRow *DeviceDraftChain::rules(int32_t j) const {
  return rules_.get<kernels::SamplingRow>() + int64_t{j} * rows_;
}

int32_t *DeviceDraftChain::draws(int32_t j) {
  return out_.get<int32_t>() + int64_t{j} * rows_;
}

int32_t *DeviceDraftChain::pass_candidates(int32_t j) {
  return out_.get<int32_t>() + int64_t{steps_} * rows_ + j * pass_layout().ints();
}

void DeviceDraftChain::mark_tables_read(cudaStream_t stream) {
  check(cudaEventRecord(tables_read_, stream), "cudaEventRecord");
}

void DeviceDraftChain::wait_tables_read() {
  check(cudaEventSynchronize(tables_read_), "chain table upload");
}

void DeviceDraftChain::download(cudaStream_t stream) {
  check(cudaMemcpyAsync(out_host_.get(), out_.get(), out_ints() * sizeof(int32_t),
                        cudaMemcpyDeviceToHost, stream),
        "draft chain download");
  check(cudaEventRecord(done_, stream), "cudaEventRecord");
  done_steps_ = steps_;
  done_rows_ = rows_;
}

bool DeviceDraftChain::collect(int32_t *tokens_out, std::vector<LogitCandidates> *cands) {
  check(cudaEventSynchronize(done_), "forward_draft_chain");
  // Fault injection for the tests: the chain reports a candidate overflow.
  static const bool fault_overflow = kernels::variant_opted_in("VEGAS_CUDA_FAULT_CHAIN_OVERFLOW");
  if (fault_overflow) return false;
  const int32_t steps = steps_, n = rows_;
  const kernels::CandidateLayout layout = pass_layout();
  const int32_t *host = out_host_.get<int32_t>();
  for (int64_t i = 0; i < int64_t{steps} * n; ++i)
    if (host[i] < 0)
      check_drawn_id(
          host[i], "device draft pass " + std::to_string(i / n) + ", row " + std::to_string(i % n));
  cands->resize(static_cast<size_t>(steps) * n);
  for (int32_t j = 0; j < steps; ++j) {
    const int32_t *counts = host + int64_t{steps} * n + j * layout.ints();
    for (int32_t i = 0; i < n; ++i) {
      // More ties than the buffer holds: the row is gone (later passes
      // reused the logits), so the caller runs the passes one by one.
      if (counts[i] < 0) return false;
      LogitCandidates &c = (*cands)[static_cast<size_t>(j) * n + i];
      c.ids.assign(layout.ids(counts, i), layout.ids(counts, i) + counts[i]);
      c.logits.assign(layout.values(counts, i), layout.values(counts, i) + counts[i]);
    }
  }
  std::copy(host, host + int64_t{steps} * n, tokens_out);
  return true;
}

void DeviceDraftChain::check_feed(const int32_t *fed, int32_t rows) const {
  for (int32_t r = 0; r < rows; ++r)
    if (fed[r] < -1 || fed[r] >= n_draws())
      fail(VEGAS_ERR_INTERNAL, "begin_candidates: row " + std::to_string(r) + " is fed draw " +
                                   std::to_string(fed[r]) + " of a chain of " +
                                   std::to_string(n_draws()));
}

const int32_t *DeviceDraftChain::upload_feed(const int32_t *fed, int32_t rows,
                                             cudaStream_t stream) {
  const size_t bytes = static_cast<size_t>(rows) * sizeof(int32_t);
  if (feed_.bytes() < bytes) {
    check(cudaStreamSynchronize(stream), "stream sync");
    feed_.allocate(std::max(bytes, size_t{4096}), "verify feed");
  }
  feed_host_.reserve(bytes, "verify feed");
  std::copy(fed, fed + rows, feed_host_.get<int32_t>());
  check(cudaMemcpyAsync(feed_.get(), feed_host_.get(), bytes, cudaMemcpyHostToDevice, stream),
        "upload of the verify feed");
  return feed_.get<int32_t>();
}

}  // namespace vegas::cuda
