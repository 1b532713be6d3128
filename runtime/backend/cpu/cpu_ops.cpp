#include "backend/cpu/cpu_ops.h"

#include <cmath>
#include <cstring>

#include "common/bf16.h"
#include "common/worker_pool.h"

namespace vegas {

void cpu_embedding(const CpuMatrix &embed, const int32_t *tokens, int64_t n, int64_t hidden,
                   float *out) {
  for (int64_t r = 0; r < n; ++r) {
    const int64_t at = int64_t{tokens[r]} * hidden;
    float *row = out + r * hidden;
    if (embed.bf16.empty()) {
      std::memcpy(row, embed.f32.data() + at, sizeof(float) * hidden);
      continue;
    }
    for (int64_t i = 0; i < hidden; ++i)
      row[i] = bf16_to_f32(embed.bf16[static_cast<size_t>(at + i)]);
  }
}

void cpu_rmsnorm(const float *x, const float *w, int64_t n, int64_t dim, float eps, float *out,
                 int n_threads) {
  parallel_ranges(n, n * dim > 65536 ? n_threads : 1, 0, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float *xr = x + r * dim;
      float *yr = out + r * dim;
      float sum_sq = 0.f;
#pragma omp simd reduction(+ : sum_sq)
      for (int64_t i = 0; i < dim; ++i) sum_sq += xr[i] * xr[i];
      const float inv = 1.f / std::sqrt(sum_sq / static_cast<float>(dim) + eps);
#pragma omp simd
      for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv * w[i];
    }
  });
}

void cpu_rope_tables(const std::vector<float> &inv_freq, float attention_scaling,
                     const int32_t *positions, int64_t n_rows, RopeTables &tables) {
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  tables.half = half;
  tables.cos.resize(static_cast<size_t>(n_rows * half));
  tables.sin.resize(static_cast<size_t>(n_rows * half));
  for (int64_t r = 0; r < n_rows; ++r) {
    const float pos = static_cast<float>(positions[r]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[static_cast<size_t>(i)];
      tables.cos[static_cast<size_t>(r * half + i)] = std::cos(angle) * attention_scaling;
      tables.sin[static_cast<size_t>(r * half + i)] = std::sin(angle) * attention_scaling;
    }
  }
}

void cpu_rope(float *x, int64_t n_rows, int64_t n_heads, int64_t head_dim, const RopeTables &tables,
              int n_threads) {
  const int64_t half = tables.half;
  parallel_ranges(n_rows, n_rows > 16 ? n_threads : 1, 0, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float *c = tables.cos.data() + r * half;
      const float *s = tables.sin.data() + r * half;
      for (int64_t h = 0; h < n_heads; ++h) {
        float *v = x + (r * n_heads + h) * head_dim;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i];
          const float b = v[i + half];
          v[i] = a * c[i] - b * s[i];
          v[i + half] = b * c[i] + a * s[i];
        }
      }
    }
  });
}

void cpu_silu_mul(float *gate, const float *up, int64_t n, int n_threads) {
  parallel_ranges(n, n > 65536 ? n_threads : 1, 0, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const float g = gate[i];
      gate[i] = g / (1.f + std::exp(-g)) * up[i];
    }
  });
}

void cpu_add(float *x, const float *y, int64_t n, int n_threads) {
  parallel_ranges(n, n > 65536 ? n_threads : 1, 0, [&](int64_t begin, int64_t end, int) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) x[i] += y[i];
  });
}

}  // namespace vegas
