// CudaContext::move_kv (token trees): the accepted path's K/V, verified in
// the slots of its nodes, copied into the slots of its positions in every
// layer (kernels/move_kv.cuh), and the quest key bounds of the pages written.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_context.h"
#include "backend/kv_move_slots.h"
#include "move_kv.cuh"

namespace vegas::cuda {

void CudaContext::move_kv(const KvMove &move) {
  const KvMoveSlots slots = resolve_kv_move(move, params_.page_size, params_.num_pages);
  const size_t n = slots.from.size();
  if (n == 0) return;
  model_.activate();
  // One upload: from and to slots (int64), then the pages (int32). Copied
  // from pageable memory, so the host vector is free on return and a second
  // call (the next sequence's path) cannot overwrite what the first reads.
  const size_t slot_bytes = n * sizeof(int64_t);
  std::vector<unsigned char> host(2 * slot_bytes + slots.pages.size() * sizeof(int32_t));
  std::memcpy(host.data(), slots.from.data(), slot_bytes);
  std::memcpy(host.data() + slot_bytes, slots.to.data(), slot_bytes);
  std::memcpy(host.data() + 2 * slot_bytes, slots.pages.data(),
              slots.pages.size() * sizeof(int32_t));
  if (host.size() > move_capacity_) {
    check(cudaStreamSynchronize(stream_), "stream sync");  // an earlier move may read the old one
    move_capacity_ = std::max(host.size(), 2 * move_capacity_);
    move_lists_.allocate(move_capacity_, "move_kv lists");
  }
  unsigned char *dev = move_lists_.get<unsigned char>();
  check(cudaMemcpyAsync(dev, host.data(), host.size(), cudaMemcpyHostToDevice, stream_),
        "move_kv upload");
  const ModelConfig &c = model_.config();
  kernels::MoveKvParams p;
  p.k_cache = kv_->k(0);
  p.v_cache = kv_->v(0);
  const int64_t element_bytes = kv_->fp8() ? 1 : 2;
  p.layer_bytes = kv_->layer_elements() * element_bytes;
  p.row_bytes = static_cast<int32_t>(c.kv_dim() * element_bytes);
  p.k_scale = kv_->k_scale(0);
  p.v_scale = kv_->v_scale(0);
  p.scale_layer_stride = kv_->scale_layer_stride();
  p.n_kv_heads = c.n_kv_heads;
  p.n_layers = c.n_layers;
  p.from = reinterpret_cast<const int64_t *>(dev);
  p.to = reinterpret_cast<const int64_t *>(dev + slot_bytes);
  p.n = static_cast<int32_t>(n);
  check(kernels::move_kv(p, stream_), "move_kv");
  enqueue_quest_bounds(reinterpret_cast<const int32_t *>(dev + 2 * slot_bytes),
                       static_cast<int32_t>(slots.pages.size()));
}

}  // namespace vegas::cuda
