// The attention input stage, fused: from the qkv GEMM output, per row and head
// add the projection bias (Qwen2), RMS-normalise each q and k head (Qwen3),
// rotate q and k (RoPE, HF rotate_half convention over the first rot_dim
// dimensions, cos/sin multiplied by the attention scaling), write q for the
// attention kernel and k, v into their KV-cache slot.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_utils.cuh"

namespace vegas::kernels {

struct RopeKvParams {
  const bf16 *qkv = nullptr;     // [rows][(n_heads + 2 * n_kv_heads) * head_dim]: q | k | v
  const bf16 *bias = nullptr;    // same width as a qkv row, or null
  const bf16 *q_norm = nullptr;  // [head_dim] or null (no q/k norm)
  const bf16 *k_norm = nullptr;  // [head_dim] or null
  float norm_eps = 1e-6f;
  const int32_t *positions = nullptr;  // [rows]
  const int32_t *slots = nullptr;      // [rows] KV slot (page * page_size + offset); < 0 = skip
  const float *inv_freq = nullptr;     // [rot_dim / 2]
  int32_t rot_dim = 0;                 // rotated dimensions (even, <= head_dim)
  float attention_scaling = 1.0f;      // multiplies cos and sin (YaRN mscale)
  bf16 *q_out = nullptr;               // [rows][n_heads][head_dim]
  bf16 *k_cache = nullptr;             // [slots][n_kv_heads][head_dim] (one layer)
  bf16 *v_cache = nullptr;
  int32_t rows = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;  // <= 256
};

cudaError_t rope_kv(const RopeKvParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
