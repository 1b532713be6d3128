#include "backend/cuda/device_selection_sets.h"

#include <algorithm>
#include <climits>
#include <string>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "common/error.h"

namespace vegas::cuda {

DeviceSelectionSets::DeviceSelectionSets(int32_t n_layers, int64_t positions)
    : stride_(static_cast<int32_t>(positions)), words_(2 + int64_t{n_layers} * (1 + positions)) {
  check(cudaEventCreate(&begin_), "cudaEventCreate");
  check(cudaEventCreate(&end_), "cudaEventCreate");
}

DeviceSelectionSets::~DeviceSelectionSets() {
  if (begin_) cudaEventDestroy(begin_);
  if (end_) cudaEventDestroy(end_);
}

int32_t DeviceSelectionSets::offset(int32_t key, cudaStream_t stream, bool *moved) {
  auto it = slot_.find(key);
  if (it == slot_.end()) {
    if (free_.empty()) {
      const int32_t grown = std::max(4, 2 * slots_);
      if (grown * words_ > INT32_MAX - 2)
        fail(VEGAS_ERR_OUT_OF_MEMORY, "CUDA: device selection sets of " + std::to_string(grown) +
                                          " sequences exceed 2^31 entries");
      DeviceBuffer bigger(static_cast<size_t>(grown * words_) * sizeof(int32_t),
                          "device selection sets");
      if (slots_ > 0)
        check(cudaMemcpyAsync(bigger.get(), records_.get(), records_.bytes(),
                              cudaMemcpyDeviceToDevice, stream),
              "selection sets copy");
      check(cudaStreamSynchronize(stream), "stream sync");
      records_ = std::move(bigger);
      *moved = true;
      for (int32_t slot = grown - 1; slot >= slots_; --slot) free_.push_back(slot);
      slots_ = grown;
    }
    it = slot_.emplace(key, free_.back()).first;
    free_.pop_back();
  }
  return static_cast<int32_t>(it->second * words_);
}

int64_t DeviceSelectionSets::find(int32_t key) const {
  const auto it = slot_.find(key);
  return it == slot_.end() ? -1 : it->second * words_;
}

void DeviceSelectionSets::forget(int32_t key) {
  auto it = slot_.find(key);
  if (it == slot_.end()) return;
  free_.push_back(it->second);
  slot_.erase(it);
  deferred_.erase(key);
}

void DeviceSelectionSets::begin_step(bool captures, int32_t cap_slots, int32_t cap_stride) {
  step_.clear();
  if (!captures) return;
  deferred_.clear();
  deferred_slots_ = cap_slots;
  deferred_stride_ = cap_stride;
}

void DeviceSelectionSets::request(int32_t key, const kernels::KvSelectDesc &d, bool deferred) {
  if (deferred)
    deferred_[key] = d;
  else
    step_.push_back(d);
}

void DeviceSelectionSets::launch_step(cudaStream_t stream, const kernels::f16 *cap_logits,
                                      const float *cap_lse, int32_t cap_slots, int32_t cap_stride,
                                      int32_t n_layers, int32_t n_heads) {
  launch(stream, step_, Captures{cap_logits, cap_lse, cap_slots, cap_stride}, n_layers, n_heads);
}

void DeviceSelectionSets::launch_deferred(cudaStream_t stream,
                                          const std::vector<BackendContext::DeferredSelect> &items,
                                          const kernels::f16 *cap_logits, const float *cap_lse,
                                          int32_t n_layers, int32_t n_heads) {
  std::vector<kernels::KvSelectDesc> descs;
  for (const BackendContext::DeferredSelect &item : items) {
    auto it = deferred_.find(item.key);
    if (it == deferred_.end())
      fail(VEGAS_ERR_INVALID_ARGUMENT,
           "select_deferred: no deferred capture for key " + std::to_string(item.key));
    kernels::KvSelectDesc d = it->second;
    if (item.row < 0 || item.row >= d.n_rows)
      fail(VEGAS_ERR_INVALID_ARGUMENT, "select_deferred: row " + std::to_string(item.row) +
                                           " outside the " + std::to_string(d.n_rows) +
                                           " captured rows of key " + std::to_string(item.key));
    d.first_slot += item.row;
    d.n_rows = 1;
    descs.push_back(d);
  }
  launch(stream, descs, Captures{cap_logits, cap_lse, deferred_slots_, deferred_stride_}, n_layers,
         n_heads);
}

void DeviceSelectionSets::collect_time() {
  if (!timed_) return;
  check(cudaEventSynchronize(end_), "selection timing");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, begin_, end_), "selection timing");
  seconds_ += ms * 1e-3;
  timed_ = false;
}

double DeviceSelectionSets::take_seconds() {
  // Without waiting: a round asks right after launching its deferred
  // selection, and a wait here kept the host from staging the next round
  // while the selection ran.
  if (timed_) {
    const cudaError_t e = cudaEventQuery(end_);
    if (e == cudaSuccess)
      collect_time();
    else if (e == cudaErrorNotReady)
      (void)cudaGetLastError();  // still running: not an error
    else
      check(e, "selection timing");
  }
  return std::exchange(seconds_, 0.0);
}

void DeviceSelectionSets::launch(cudaStream_t stream,
                                 const std::vector<kernels::KvSelectDesc> &descs,
                                 const Captures &cap, int32_t n_layers, int32_t n_heads) {
  if (descs.empty()) return;
  // The previous request's upload must be done before its pinned source is
  // rewritten; the timing events of that request are read first.
  collect_time();
  int32_t max_n = 1;
  for (const kernels::KvSelectDesc &d : descs) max_n = std::max(max_n, d.n);
  const size_t key_bytes = descs.size() * size_t{static_cast<uint32_t>(n_layers)} *
                           static_cast<size_t>(max_n) * sizeof(uint32_t);
  if (key_bytes > keys_.bytes()) {
    check(cudaStreamSynchronize(stream), "stream sync");
    keys_.allocate(std::max(key_bytes, 2 * keys_.bytes()), "selection scratch");
  }
  const size_t desc_bytes = descs.size() * sizeof(kernels::KvSelectDesc);
  if (desc_bytes > desc_.bytes()) {
    check(cudaStreamSynchronize(stream), "stream sync");
    desc_.allocate(std::max(desc_bytes, 2 * desc_.bytes()), "selection requests");
  }
  desc_host_.reserve(desc_bytes, "selection requests");
  std::copy(descs.begin(), descs.end(), desc_host_.get<kernels::KvSelectDesc>());
  check(cudaMemcpyAsync(desc_.get(), desc_host_.get(), desc_bytes, cudaMemcpyHostToDevice, stream),
        "selection requests upload");
  kernels::KvSelectParams p;
  p.desc = desc_.get<kernels::KvSelectDesc>();
  p.n_seqs = static_cast<int32_t>(descs.size());
  p.n_layers = n_layers;
  p.n_heads = n_heads;
  p.cap_logits = cap.logits;
  p.cap_lse = cap.lse;
  p.cap_slots = cap.slots;
  p.cap_stride = cap.stride;
  p.keys = keys_.get<uint32_t>();
  p.key_stride = max_n;
  p.records = records_.get<int32_t>();
  check(cudaEventRecord(begin_, stream), "cudaEventRecord");
  check(kernels::kv_select(p, stream), "kv_select");
  check(cudaEventRecord(end_, stream), "cudaEventRecord");
  timed_ = true;
}

}  // namespace vegas::cuda
