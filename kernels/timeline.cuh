// A debug instrument (builds with -DVEGAS_TIMELINE only): kernels stamp the
// global timer and their SM's clock at named points (VEGAS_MARK), thread 0 of
// each block, into a per-file table (VEGAS_TIMELINE_TABLE(name)) that the
// marked launch overwrites; name_print() writes it out. It shows where a short
// kernel's time goes inside the chain of PDL launches, which ncu (kernels
// serialised) cannot. Marked now: qkv_rope_mma, the bf16 tensor-core decode
// attention, the o projection, gate/up and down, each of a step's last layer.
//   cmake -S . -B build-tl -G Ninja -DVEGAS_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
//     -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-DVEGAS_TIMELINE \
//     -DCMAKE_CXX_FLAGS=-DVEGAS_TIMELINE && ninja -C build-tl bench_cuda_decode
//   VEGAS_BENCH_SHAPES=2048x1 build-tl/bin/bench_cuda_decode > out.txt
//   tools/timeline_summary.py out.txt
#pragma once

#if defined(VEGAS_TIMELINE)
#include <cstdio>

#include <cuda_runtime.h>

namespace vegas::kernels::timeline {

constexpr int kBlocks = 512, kMarks = 12;

struct Table {
  unsigned long long t[kBlocks][kMarks];  // %globaltimer, ns
  long long c[kBlocks][kMarks];           // clock64 of the block's SM
  int sm[kBlocks];
};

#if defined(__CUDACC__)
__device__ __forceinline__ void mark(Table &tab, int mark) {
  const int b = blockIdx.x + blockIdx.y * gridDim.x;
  if (threadIdx.x != 0 || b >= kBlocks) return;
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  tab.t[b][mark] = t;
  tab.c[b][mark] = clock64();
  tab.sm[b] = static_cast<int>(sm);
}
#endif

// Prints one table: per block, each mark as ns after the table's earliest
// stamp (global timer) and as cycles after the block's mark 0.
inline void print(const char *name, const Table &h, int marks) {
  // Blocks stamped more than 100 us before the latest launch's are left over
  // from an earlier launch with a larger grid (a verify pass before drafts).
  unsigned long long latest = 0;
  for (int b = 0; b < kBlocks; ++b)
    if (h.t[b][0] > latest) latest = h.t[b][0];
  auto current = [&](int b) { return h.t[b][0] != 0 && h.t[b][0] + 100000ull >= latest; };
  unsigned long long t0 = ~0ull;
  int blocks = 0;
  for (int b = 0; b < kBlocks; ++b)
    if (current(b)) {
      blocks = b + 1;
      if (h.t[b][0] < t0) t0 = h.t[b][0];
    }
  std::printf("timeline %s: %d blocks, t0 %llu\n", name, blocks, t0);
  for (int b = 0; b < blocks; ++b) {
    if (!current(b)) continue;
    std::printf("  %-4d sm %-3d ns", b, h.sm[b]);
    for (int m = 0; m < marks; ++m)
      std::printf(" %7lld", h.t[b][m] ? static_cast<long long>(h.t[b][m] - t0) : -1ll);
    std::printf("  cyc");
    for (int m = 1; m < marks; ++m) std::printf(" %6lld", h.c[b][m] ? h.c[b][m] - h.c[b][0] : -1ll);
    std::printf("\n");
  }
}

}  // namespace vegas::kernels::timeline

#define VEGAS_TIMELINE_TABLE(name)                                \
  __device__ vegas::kernels::timeline::Table name;                \
  void name##_print(int marks) {                                  \
    static vegas::kernels::timeline::Table h;                     \
    if (cudaMemcpyFromSymbol(&h, name, sizeof(h)) == cudaSuccess) \
      vegas::kernels::timeline::print(#name, h, marks);           \
  }
#define VEGAS_MARK(name, m, cond)                      \
  do {                                                 \
    if (cond) vegas::kernels::timeline::mark(name, m); \
  } while (0)
#else
#define VEGAS_MARK(name, m, cond) \
  do {                            \
    (void)(cond);                 \
  } while (0)
#endif
