// The element-wise and per-row operations of the CPU reference backend (all
// f32, Hugging Face semantics). The CUDA kernels are checked against these.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/cpu_weights.h"

namespace vegas {

// out[r] = embed[tokens[r]] for n rows of `hidden` floats (bf16 widened).
// Token ids must be validated by the caller.
void cpu_embedding(const CpuMatrix &embed, const int32_t *tokens, int64_t n, int64_t hidden,
                   float *out);

// HF RMSNorm: out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * w, for n rows of
// `dim` floats. `out` may equal `x` (in place). Parallel over rows.
void cpu_rmsnorm(const float *x, const float *w, int64_t n, int64_t dim, float eps, float *out,
                 int n_threads);

// Rotary tables for one forward pass: for every row, cos/sin of
// pos * inv_freq[i] (angle rounded to f32 as HF does) times attention_scaling;
// each table is [n_rows][inv_freq.size()].
struct RopeTables {
  int64_t half = 0;  // rotated pairs per head = rotary_dim / 2
  std::vector<float> cos;
  std::vector<float> sin;
};
void cpu_rope_tables(const std::vector<float> &inv_freq, float attention_scaling,
                     const int32_t *positions, int64_t n_rows, RopeTables &tables);

// HF rotate_half RoPE, in place, on n_rows rows of n_heads heads of head_dim
// floats (row stride n_heads * head_dim): the pairs (i, i + half) for
// i < half rotate by the row's angle i; dims past 2 * half are left alone
// (partial rotary).
void cpu_rope(float *x, int64_t n_rows, int64_t n_heads, int64_t head_dim, const RopeTables &tables,
              int n_threads);

// SwiGLU: gate[i] = silu(gate[i]) * up[i] for n floats (in place on gate).
void cpu_silu_mul(float *gate, const float *up, int64_t n, int n_threads);

// x[i] += y[i] for n floats.
void cpu_add(float *x, const float *y, int64_t n, int n_threads);

}  // namespace vegas
