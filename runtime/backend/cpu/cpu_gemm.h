// The CPU backend's matrix product in the Hugging Face Linear layout:
// Y[m][n] = sum_k X[m][k] * W[n][k] (+ bias[n]), f32 arithmetic, row-major;
// W is f32 or bf16 (widened exactly as it is read).
#pragma once

#include <cstdint>

#include "backend/cpu/cpu_weights.h"

namespace vegas {

// x: [m][k], w: [n][k], bias: [n] or nullptr, y: [m][n] (must not alias x).
// One row (decode) streams W exactly once; more rows reuse each block of W
// from cache across a block of X rows. Runs on `n_threads` worker threads.
void cpu_matmul(const float *x, int64_t m, const CpuMatrix &w, const float *bias, int64_t n,
                int64_t k, float *y, int n_threads);

}  // namespace vegas
