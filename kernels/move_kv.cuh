// Token trees (runtime TokenTree): after verification, the accepted path's
// K and V, written in the slots of its nodes, are copied into the slots of
// its positions, in every layer. Moves apply in list order: a later move may
// overwrite an earlier one's source (path r b e: b -> slot 1, then e ->
// slot 2, which held b), so each thread copies its part of a slot row for
// every move in turn.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_utils.cuh"

namespace vegas::kernels {

struct MoveKvParams {
  bf16 *k_cache = nullptr;  // layer 0's caches: [num_slots][row_bytes], layers apart
  bf16 *v_cache = nullptr;
  int64_t layer_bytes = 0;  // from one layer's cache to the next
  int32_t row_bytes = 0;    // one slot's K (or V) of every KV head: a multiple of 16
  // fp8 caches only (null for bf16): layer 0's scales [num_slots][n_kv_heads].
  float *k_scale = nullptr;
  float *v_scale = nullptr;
  int64_t scale_layer_stride = 0;  // floats from one layer's scales to the next
  int32_t n_kv_heads = 0;
  int32_t n_layers = 0;
  const int64_t *from = nullptr;  // [n] source slots (device)
  const int64_t *to = nullptr;    // [n] destination slots
  int32_t n = 0;
};

cudaError_t move_kv(const MoveKvParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
