// Before writing a one-cluster decode step for small models: how fast one
// thread-block cluster (8 or 16 multiprocessors, one block each) streams a
// decode step's bytes, and what its phase boundaries (cluster barriers) cost.
// The phases are the embedded model's at 2K x 1 (per layer: the qkv weights,
// the layer's K/V, o, gate_up, down; then the lm_head), each in its own
// buffer; each block reads its share of a phase, then the cluster meets at
// a barrier, as a step's dependent phases would. Printed: microseconds a step
// (medians over replays), with the L2 warm (the step repeated) and cold (a
// 256 MiB buffer rewritten between steps), and with no bytes (barriers only).
// Compare with bench_cuda_decode's 2K x 1 step, a chain of PDL kernels over
// the whole device.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 1024;
constexpr int kUnroll = 8;  // 16-byte loads in flight per thread: 128 KiB a block

__global__ void __launch_bounds__(kThreads, 1)
    cluster_stream_kernel(const uint4 *buf, const int64_t *phase_off, const int64_t *phase_len,
                          int n_phases, unsigned *out) {
  cg::cluster_group cluster = cg::this_cluster();
  const int64_t rank = cluster.block_rank(), size = cluster.num_blocks();
  const int64_t stride = size * kThreads;
  unsigned x = 0;
  for (int p = 0; p < n_phases; ++p) {
    const uint4 *base = buf + phase_off[p];
    const int64_t len = phase_len[p];
    for (int64_t i = rank * kThreads + threadIdx.x; i < len; i += stride * kUnroll) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t j = i + u * stride;
        v[u] = j < len ? __ldg(base + j) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    cluster.sync();  // the next phase depends on every block's part of this one
  }
  if (x == 0x12345678u) out[blockIdx.x] = x;  // keeps the loads
}

void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Setup {
  std::vector<int64_t> off, len;  // in uint4
  int64_t total = 0;
};

Setup step_phases(bool with_bytes) {
  // 22m: hidden 512, q 512, kv 128, intermediate 1024, vocab 8192, bf16; KV of 2K tokens.
  const int64_t per_layer[] = {512 * 768 * 2, 2048 * 2 * 128 * 2, 512 * 512 * 2, 512 * 2048 * 2,
                               1024 * 512 * 2};
  Setup s;
  auto add = [&](int64_t bytes) {
    s.off.push_back(s.total);
    const int64_t n = with_bytes ? bytes / 16 : 0;
    s.len.push_back(n);
    s.total += (bytes / 16 + 255) / 256 * 256;  // separate buffers either way
  };
  for (int l = 0; l < 8; ++l)
    for (int64_t b : per_layer) add(b);
  add(8192 * 512 * 2);
  return s;
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  check(cudaFuncSetAttribute(cluster_stream_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed,
                             1),
        "non-portable clusters");
  uint4 *buf = nullptr;
  char *flush = nullptr;
  unsigned *out = nullptr;
  const size_t flush_bytes = size_t{256} << 20;
  const Setup full = step_phases(true);
  check(cudaMalloc(&buf, full.total * 16), "buffer");
  check(cudaMemset(buf, 1, full.total * 16), "fill");
  check(cudaMalloc(&flush, flush_bytes), "flush buffer");
  check(cudaMalloc(&out, 1024 * sizeof(unsigned)), "out");
  int64_t step_bytes = 0;
  for (int64_t n : full.len) step_bytes += n * 16;
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  std::printf("one cluster streaming a 22m 2K x 1 decode step: %.1f MB in %zu phases\n",
              static_cast<double>(step_bytes) / 1e6, full.len.size());
  std::printf("%8s %8s %12s %12s %10s\n", "cluster", "bytes", "L2", "us/step", "GB/s");
  for (const int cs : {8, 16}) {
    for (const bool bytes : {true, false}) {
      const Setup s = step_phases(bytes);
      int64_t *off = nullptr, *len = nullptr;
      check(cudaMalloc(&off, s.off.size() * sizeof(int64_t)), "offsets");
      check(cudaMalloc(&len, s.len.size() * sizeof(int64_t)), "lengths");
      check(cudaMemcpy(off, s.off.data(), s.off.size() * sizeof(int64_t), cudaMemcpyHostToDevice),
            "offsets");
      check(cudaMemcpy(len, s.len.data(), s.len.size() * sizeof(int64_t), cudaMemcpyHostToDevice),
            "lengths");
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(static_cast<unsigned>(cs));
      cfg.blockDim = dim3(kThreads);
      cudaLaunchAttribute attr;
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = static_cast<unsigned>(cs);
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      const int n_phases = static_cast<int>(s.off.size());
      for (const bool cold : {false, true}) {
        if (!bytes && cold) continue;
        std::vector<float> ms;
        for (int rep = 0; rep < 25; ++rep) {
          if (cold) check(cudaMemset(flush, rep, flush_bytes), "flush");
          check(cudaEventRecord(a), "record");
          check(cudaLaunchKernelEx(&cfg, cluster_stream_kernel, static_cast<const uint4 *>(buf),
                                   static_cast<const int64_t *>(off),
                                   static_cast<const int64_t *>(len), n_phases, out),
                "launch");
          check(cudaEventRecord(b), "record");
          check(cudaEventSynchronize(b), "sync");
          float t = 0;
          check(cudaEventElapsedTime(&t, a, b), "elapsed");
          if (rep >= 5) ms.push_back(t);
        }
        const float us = median(ms) * 1e3f;
        std::printf("%8d %8s %12s %12.1f %10.0f\n", cs, bytes ? "yes" : "none",
                    bytes ? (cold ? "cold" : "warm") : "-", us,
                    bytes ? static_cast<double>(step_bytes) / (us * 1e3) : 0.0);
      }
      cudaFree(off);
      cudaFree(len);
    }
  }
  cudaFree(buf);
  cudaFree(flush);
  cudaFree(out);
  return 0;
}
