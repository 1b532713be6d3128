// The qkv projection of a few rows (decoding, drafting, small verification
// batches) with rope_kv's attention input stage fused into its epilogue: one
// block per head computes the head's outputs for every row on the tensor
// cores, rounds them to bf16 as the separate GEMM stores them, adds the bias
// and runs rope_kv_head (q/k norm, RoPE, q out, k/v into the cache). One
// launch and one dependent round trip per layer fewer than small_gemm +
// rope_kv, which stay the path for shapes this kernel does not serve.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "rope_kv.cuh"
#include "small_gemm.cuh"

namespace vegas::kernels {

// Whether the fused kernel serves m rows of k inputs (the hidden size) with
// this head_dim: m <= kSmallGemmMmaMaxRows (row tiles of 16); head_dim 64 with k <= 1024, or 128
// with k <= 512.
bool qkv_rope_mma_supports(int32_t m, int32_t k, int32_t head_dim);

// g: the GEMM's input side and weights (x_f32 + norm_weight or x_bf16, w =
// the fused qkv weight [(n_heads + 2 n_kv_heads) * head_dim][k], m, k, eps);
// its n, epilogue and outputs are not used. r: the stage, as for rope_kv, with
// r.rows == g.m; r.qkv is not read (the rows come from the GEMM).
cudaError_t qkv_rope_mma(const SmallGemmParams &g, const RopeKvParams &r, cudaStream_t stream);

// Sets the kernels' shared-memory limits; call once per device, outside capture.
cudaError_t qkv_rope_mma_init();

}  // namespace vegas::kernels
