#include "backend/cpu/cpu_gemm.h"
#include "common/bf16.h"
#include "common/target_clones.h"
#include "common/worker_pool.h"

#include <algorithm>

namespace vegas {
namespace {

// Eight f32 lanes; GCC/Clang lower it to whatever the clone's ISA has (two SSE
// registers on baseline x86-64, one AVX register on x86-64-v3/v4).
typedef float Lanes __attribute__((vector_size(32)));
constexpr int kLanes = 8;

// Rows of X and W one micro-kernel call combines, and the cache blocks.
constexpr int64_t kMr = 4;
constexpr int64_t kNr = 4;
constexpr int64_t kRowBlock = 128;  // X rows per task (stay in L2 while W's block streams by)
constexpr int64_t kColBlock = 16;   // W rows per task (16 x k floats stay in L1/L2)

typedef uint16_t Bf16Lanes __attribute__((vector_size(16)));
typedef uint32_t WideLanes __attribute__((vector_size(32)));

// Eight weights from w as f32 lanes; bf16 widens exactly (its bits are the
// f32's upper half).
__attribute__((always_inline)) inline void load_lanes(const float *w, Lanes &out) {
  __builtin_memcpy(&out, w, sizeof out);
}
__attribute__((always_inline)) inline void load_lanes(const uint16_t *w, Lanes &out) {
  Bf16Lanes h;
  __builtin_memcpy(&h, w, sizeof h);
  const WideLanes wide = __builtin_convertvector(h, WideLanes) << 16;
  __builtin_memcpy(&out, &wide, sizeof out);
}
__attribute__((always_inline)) inline float widen(float v) {
  return v;
}
__attribute__((always_inline)) inline float widen(uint16_t v) {
  return bf16_to_f32(v);
}

// Lanes are never passed by value between functions (that would tie the
// clones to an ABI); loads are unaligned memcpys the compiler turns into moves.
// y[i][j] = dot(x row i, w row j) for an MR x NR block: every X and W vector
// loaded once feeds NR (resp. MR) products held in registers. W is f32 or
// bf16 (W_T), widened as it is loaded.
template <int MR, int NR, typename W_T>
__attribute__((always_inline)) inline void micro_kernel(const float *x, const W_T *w,
                                                        const float *bias, int64_t k, float *y,
                                                        int64_t ldy) {
  Lanes acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = Lanes{};
  int64_t kk = 0;
  for (; kk + kLanes <= k; kk += kLanes) {
    Lanes xv[MR];
    for (int i = 0; i < MR; ++i) __builtin_memcpy(&xv[i], x + i * k + kk, sizeof(Lanes));
    for (int j = 0; j < NR; ++j) {
      Lanes wv;
      load_lanes(w + j * k + kk, wv);
      for (int i = 0; i < MR; ++i) acc[i][j] += xv[i] * wv;
    }
  }
  // The last k % 8 weights of each row, widened first, so that both weight
  // types run the same f32 expression (the compiler fuses it alike).
  float tail[NR][kLanes];
  for (int j = 0; j < NR; ++j)
    for (int64_t t = kk; t < k; ++t) tail[j][t - kk] = widen(w[j * k + t]);
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float s = 0.f;
      for (int l = 0; l < kLanes; ++l) s += acc[i][j][l];
      for (int64_t t = kk; t < k; ++t) s += x[i * k + t] * tail[j][t - kk];
      y[i * ldy + j] = bias != nullptr ? s + bias[j] : s;
    }
  }
}

// One task: X rows [m0, m1) against W rows [n0, n1).
template <typename W_T>
__attribute__((always_inline)) inline void gemm_block(const float *x, int64_t m0, int64_t m1,
                                                      const W_T *w, const float *bias, int64_t n0,
                                                      int64_t n1, int64_t k, float *y,
                                                      int64_t ldy) {
  int64_t n = n0;
  for (; n + kNr <= n1; n += kNr) {
    const W_T *wb = w + n * k;
    const float *bb = bias != nullptr ? bias + n : nullptr;
    int64_t m = m0;
    for (; m + kMr <= m1; m += kMr)
      micro_kernel<kMr, kNr>(x + m * k, wb, bb, k, y + m * ldy + n, ldy);
    for (; m < m1; ++m) micro_kernel<1, kNr>(x + m * k, wb, bb, k, y + m * ldy + n, ldy);
  }
  for (; n < n1; ++n) {
    const W_T *wb = w + n * k;
    const float *bb = bias != nullptr ? bias + n : nullptr;
    int64_t m = m0;
    for (; m + kMr <= m1; m += kMr)
      micro_kernel<kMr, 1>(x + m * k, wb, bb, k, y + m * ldy + n, ldy);
    for (; m < m1; ++m) micro_kernel<1, 1>(x + m * k, wb, bb, k, y + m * ldy + n, ldy);
  }
}

// The clones (target_clones.h) of each weight type.
VEGAS_TARGET_CLONES void gemm_block_f32(const float *x, int64_t m0, int64_t m1, const float *w,
                                        const float *bias, int64_t n0, int64_t n1, int64_t k,
                                        float *y, int64_t ldy) {
  gemm_block(x, m0, m1, w, bias, n0, n1, k, y, ldy);
}
VEGAS_TARGET_CLONES void gemm_block_bf16(const float *x, int64_t m0, int64_t m1, const uint16_t *w,
                                         const float *bias, int64_t n0, int64_t n1, int64_t k,
                                         float *y, int64_t ldy) {
  gemm_block(x, m0, m1, w, bias, n0, n1, k, y, ldy);
}

}  // namespace

void cpu_matmul(const float *x, int64_t m, const CpuMatrix &w, const float *bias, int64_t n,
                int64_t k, float *y, int n_threads) {
  if (m <= 0 || n <= 0) return;
  const int64_t row_blocks = (m + kRowBlock - 1) / kRowBlock;
  const int64_t col_blocks = (n + kColBlock - 1) / kColBlock;
  const int64_t tasks = row_blocks * col_blocks;
  const bool bf16 = !w.bf16.empty();
  // Tasks walk W's blocks fastest, so neighbouring threads share X rows and,
  // with one row block (decode), each thread streams its own slice of W once.
  parallel_ranges(tasks, n_threads, 0, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t rb = t / col_blocks;
      const int64_t cb = t % col_blocks;
      const int64_t m0 = rb * kRowBlock, m1 = std::min(m, m0 + kRowBlock);
      const int64_t n0 = cb * kColBlock, n1 = std::min(n, n0 + kColBlock);
      if (bf16)
        gemm_block_bf16(x, m0, m1, w.bf16.data(), bias, n0, n1, k, y, n);
      else
        gemm_block_f32(x, m0, m1, w.f32.data(), bias, n0, n1, k, y, n);
    }
  });
}

}  // namespace vegas
