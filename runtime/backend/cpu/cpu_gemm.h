// The CPU backend's matrix product in the Hugging Face Linear layout:
// Y[m][n] = sum_k X[m][k] * W[n][k] (+ bias[n]), all f32, row-major.
#pragma once

#include <cstdint>

namespace vegas {

// x: [m][k], w: [n][k], bias: [n] or nullptr, y: [m][n] (must not alias x).
// One row (decode) streams W exactly once; more rows reuse each block of W
// from cache across a block of X rows. Runs on `n_threads` OpenMP threads.
void cpu_matmul(const float *x, int64_t m, const float *w, const float *bias, int64_t n, int64_t k,
                float *y, int n_threads);

}  // namespace vegas
