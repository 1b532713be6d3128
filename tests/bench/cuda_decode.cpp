// Decode and prefill throughput of the CUDA backend against the memory floor
// (DESIGN §7). Usage: bench_cuda_decode [model_dir] [qwen3-8b config.json]
//
// For each (model, context, batch): a context whose KV holds `context` tokens
// per sequence (filled with random values: decode cost does not depend on
// them), then greedy decode steps through forward_sample (graph replay after
// two warm-up steps). Each step ends in a host sync (the sampled ids), so host
// clock intervals around steps are device time plus the unavoidable step
// overhead; the median over the timed steps is reported. Floor = (weight bytes +
// KV bytes read) / bandwidth, the bandwidth measured here by a device-to-device
// copy timed with CUDA events (bytes read + written).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/lt_gemm.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/weight_store.h"
#include "sampling/sampling.h"

using namespace vegas;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void cuda_ok(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Device-to-device copy bandwidth, bytes read + written per second.
double measure_bandwidth() {
  const size_t bytes = size_t{2} << 30;
  void *a = nullptr, *b = nullptr;
  cuda_ok(cudaMalloc(&a, bytes), "malloc");
  cuda_ok(cudaMalloc(&b, bytes), "malloc");
  cudaMemset(a, 0x5a, bytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> t;
  for (int i = 0; i < 23; ++i) {
    cudaEventRecord(e0);
    cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i >= 3) t.push_back(ms * 1e-3);
  }
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / median(t);
}

// bf16 GEMM rate of cuBLASLt at 8192^3 (the prefill ceiling).
double measure_gemm_flops() {
  const int64_t n = 8192;
  void *x, *w, *y;
  cuda_ok(cudaMalloc(&x, n * n * 2), "malloc");
  cuda_ok(cudaMalloc(&w, n * n * 2), "malloc");
  cuda_ok(cudaMalloc(&y, n * n * 2), "malloc");
  cudaMemset(x, 0x3c, n * n * 2);  // non-zero bf16 values (~0.0115)
  cudaMemset(w, 0x3b, n * n * 2);
  cuda::LtGemm gemm;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> t;
  for (int i = 0; i < 13; ++i) {
    cudaEventRecord(e0);
    gemm.run(x, w, y, false, false, n, n, n, nullptr);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i >= 3) t.push_back(ms * 1e-3);
  }
  cudaFree(x);
  cudaFree(w);
  cudaFree(y);
  return 2.0 * n * n * n / median(t);
}

struct Row {
  std::string name;
  int context, batch;
  double step_s, tok_s, bytes, floor_s, fraction;
};

Row bench_decode(BackendModel &model, const std::string &name, int context, int batch,
                 double bandwidth) {
  const int page = 16;
  const int pages_per_seq = (context + 1 + page - 1) / page;
  ContextParams p;
  p.page_size = page;
  p.num_pages = pages_per_seq * batch;
  p.max_rows = std::max(batch, 64);
  auto ctx = model.create_context(p);
  auto *cctx = dynamic_cast<cuda::CudaContext *>(ctx.get());
  cctx->randomize_kv(1234);
  std::vector<std::vector<int32_t>> tables(batch);
  std::vector<int32_t> tokens(batch);
  ForwardBatch b;
  for (int s = 0; s < batch; ++s) {
    for (int i = 0; i < pages_per_seq; ++i) tables[s].push_back(s * pages_per_seq + i);
    tokens[s] = (s * 7919 + 13) % model.config().vocab_size;
    SeqRows r;
    r.tokens = &tokens[s];
    r.n_tokens = 1;
    r.start_pos = context;
    r.page_table = tables[s].data();
    r.n_pages = pages_per_seq;
    b.seqs.push_back(r);
  }
  SamplingParams greedy;
  std::vector<RowSampling> rows(batch, RowSampling{&greedy, 0});
  std::vector<int32_t> out(batch);
  for (int i = 0; i < 5; ++i) ctx->forward_sample(b, rows.data(), out.data());
  std::vector<double> t;
  for (int i = 0; i < 60; ++i) {
    for (int s = 0; s < batch; ++s) tokens[s] = out[s];  // feed the sampled ids back
    const auto t0 = std::chrono::steady_clock::now();
    ctx->forward_sample(b, rows.data(), out.data());
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  Row row{name, context, batch, median(t), 0, 0, 0, 0};
  row.tok_s = batch / row.step_s;
  row.bytes = double(model.weight_bytes()) + double(batch) * (context + 1) * model.kv_bytes_per_token();
  row.floor_s = row.bytes / bandwidth;
  row.fraction = row.floor_s / row.step_s;
  return row;
}

// Prefill of one `len`-token prompt in chunks; returns seconds.
double bench_prefill(BackendModel &model, int len, int chunk) {
  ContextParams p;
  p.page_size = 16;
  p.num_pages = (len + 15) / 16;
  p.max_rows = chunk;
  auto ctx = model.create_context(p);
  std::vector<int32_t> table(p.num_pages), tokens(len);
  for (int i = 0; i < p.num_pages; ++i) table[i] = i;
  for (int i = 0; i < len; ++i) tokens[i] = (i * 7919 + 13) % model.config().vocab_size;
  std::vector<double> t;
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < len; s += chunk) {
      ForwardBatch b;
      SeqRows r;
      r.tokens = tokens.data() + s;
      r.n_tokens = std::min(chunk, len - s);
      r.start_pos = s;
      r.page_table = table.data();
      r.n_pages = p.num_pages;
      r.logits = s + chunk >= len ? SeqRows::Logits::kLast : SeqRows::Logits::kNone;
      b.seqs.push_back(r);
      ctx->forward(b);
    }
    if (rep > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(t);
}

// Prefill of an 8K prompt in chunks of 2048, against the GEMM peak. Flops:
// 2 x (the layers' matrix parameters) per token, plus causal attention
// (QK^T and PV: 4 x heads x head_dim per visible pair); the embedding is a
// gather and the lm_head runs on the last row only, so neither is counted.
void report_prefill(BackendModel &model, const std::string &name, double peak) {
  const int len = 8192;
  const double s = bench_prefill(model, len, 2048);
  const ModelConfig &c = model.config();
  const double per_layer = double(c.hidden_size) * (c.q_dim() + 2 * c.kv_dim()) +
                           double(c.q_dim()) * c.hidden_size +
                           3.0 * c.hidden_size * c.intermediate_size;
  const double attn = 4.0 * c.n_layers * c.n_heads * c.head_dim * (double(len) * (len + 1) / 2);
  const double flops = 2.0 * per_layer * c.n_layers * len + attn;
  std::printf("prefill 8K prompt (%s, chunks of 2048): %.2f ms, %.0f tok/s, %.1f TFLOP/s = %.1f%% "
              "of GEMM peak\n",
              name.c_str(), s * 1e3, len / s, flops / s / 1e12, 100 * flops / s / peak);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char **argv) {
  const std::string dir = argc > 1 ? argv[1] : std::string(VEGAS_SOURCE_DIR) + "/models/vegas-code-22m";
  const std::string qwen = argc > 2 ? argv[2] : "";
  try {
    const double bw = measure_bandwidth();
    const double peak = measure_gemm_flops();
    std::printf("device-to-device bandwidth %.0f GB/s, cuBLASLt bf16 GEMM %.0f TFLOP/s\n", bw / 1e9,
                peak / 1e12);
    std::vector<Row> rows;
    {
      const ModelConfig config = load_model_config(dir + "/config.json");
      auto store = WeightStore::open(dir);
      const ModelWeights weights = bind_model_weights(config, *store);
      auto model = create_cuda_backend(config, weights, CudaBackendOptions{});
      for (int context : {2048, 8192})
        for (int batch : {1, 16, 64}) {
          rows.push_back(bench_decode(*model, "vegas-code-22m", context, batch, bw));
          std::fflush(stdout);
        }
      report_prefill(*model, "vegas-code-22m", peak);
    }
    if (!qwen.empty()) {
      const ModelConfig config = load_model_config(qwen);
      auto model = create_cuda_backend_synthetic(config, 42, CudaBackendOptions{});
      rows.push_back(bench_decode(*model, "qwen3-8b (synthetic)", 32768, 4, bw));
      report_prefill(*model, "qwen3-8b (synthetic)", peak);
    }
    std::printf("\n%-22s %7s %6s %10s %10s %10s %10s %8s\n", "model", "context", "batch",
                "step_ms", "tok/s", "MB/step", "floor_ms", "of_floor");
    for (const Row &r : rows)
      std::printf("%-22s %7d %6d %10.3f %10.0f %10.1f %10.3f %7.1f%%\n", r.name.c_str(), r.context,
                  r.batch, r.step_s * 1e3, r.tok_s, r.bytes / 1e6, r.floor_s * 1e3,
                  100 * r.fraction);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "bench_cuda_decode: %s\n", e.what());
    return 1;
  }
  return 0;
}
