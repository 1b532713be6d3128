// Decode and prefill throughput of the CUDA backend against the memory floor
// (DESIGN §7). Usage: bench_cuda_decode [model_dir] [qwen3-8b config.json]
//
// For each (model, context, batch): a context whose KV holds `context` tokens
// per sequence (filled with random values: decode cost does not depend on
// them), then greedy decode steps through forward_sample (graph replay after
// two warm-up steps). Each step ends in a host sync (the sampled ids), so host
// clock intervals around steps are device time plus the unavoidable step
// overhead; the median over the timed steps is reported (device_ms: the same
// step replayed back to back, timed by CUDA events: the host's share left
// out). Floor = (weight bytes +
// KV bytes read) / bandwidth, the bandwidth measured here by a device-to-device
// copy timed with CUDA events (bytes read + written; the library's
// measure_copy_bandwidth, the one every floor uses). "draft" rows are sparse
// draft steps of the same shape (kDraftRatio of the context per layer), and
// their step time is also reported as a share of the dense step's.
// VEGAS_BENCH_SHAPES="2048x1,8192x16,8192x16d" runs only those embedded-model
// shapes ("d": the sparse draft step), without prefill or the Qwen3-8B rows
// (for profilers such as ncu, which replay every kernel).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/lt_gemm.h"
#include "bench_env.h"
#include "decode_rows.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/weight_store.h"
#include "sampling/sampling.h"
#include "synthetic_weights.h"

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

constexpr double kDraftRatio = 0.07;  // the sparse draft rows' selected share

struct Row {
  std::string name;
  int context, batch;
  double step_s, tok_s, bytes, floor_s, fraction;
  double device_s;  // the step's graph replayed back to back (no host share)
};

// sparse_ratio > 0: a sparse draft step instead (DESIGN §3): every layer of
// every sequence attends to ceil(ratio * context) (at least 256) positions
// spread over its context, plus its own row, through a host sparse record.
// kv_fp8: the fp8 KV cache (ContextParams::kv_fp8).
Row bench_decode(BackendModel &model, const std::string &name, int context, int batch,
                 double bandwidth, double sparse_ratio = 0.0, bool kv_fp8 = false) {
  const int page = 16;
  const int pages_per_seq = (context + 1 + page - 1) / page;
  ContextParams p;
  p.page_size = page;
  p.num_pages = pages_per_seq * batch;
  p.max_rows = std::max(batch, 64);
  p.kv_fp8 = kv_fp8;
  auto ctx = model.create_context(p);
  auto *cctx = dynamic_cast<cuda::CudaContext *>(ctx.get());
  cctx->randomize_kv(1234);
  const int n_layers = model.config().n_layers;
  const int selected =
      sparse_ratio > 0 ? std::min(context, std::max(256, int(std::ceil(sparse_ratio * context))))
                       : 0;
  std::vector<int32_t> positions(size_t(n_layers) * selected), counts(n_layers, selected);
  for (int l = 0; l < n_layers; ++l)  // evenly spread, a different phase per layer
    for (int i = 0; i < selected; ++i)
      positions[size_t(l) * selected + i] =
          int32_t((int64_t(i) * context + l % 7) / selected) % context;
  SparseAttention sparse;
  sparse.prefix = context;
  sparse.positions = positions.data();
  sparse.counts = counts.data();
  sparse.stride = selected;
  bench::DecodeRows rows_in;
  bench::make_decode_rows(batch, pages_per_seq, context, model.config().vocab_size, &rows_in);
  ForwardBatch &b = rows_in.batch;
  std::vector<int32_t> &tokens = rows_in.tokens;
  if (selected > 0)
    for (SeqRows &r : b.seqs) r.sparse = &sparse;
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
  Row row{name + (selected > 0 ? " draft" : "") + (kv_fp8 ? " fp8-kv" : ""),
          context,
          batch,
          median(t),
          0,
          0,
          0,
          0,
          0};
  row.device_s = cctx->replay_seconds(b, 60);
  row.tok_s = batch / row.step_s;
  const int keys = selected > 0 ? selected + 1 : context + 1;
  row.bytes =
      double(model.weight_bytes()) + double(batch) * keys * model.kv_bytes_per_token(kv_fp8);
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
    if (rep > 0)
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
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
  std::printf(
      "prefill 8K prompt (%s, chunks of 2048): %.2f ms, %.0f tok/s, %.1f TFLOP/s = %.1f%% "
      "of GEMM peak\n",
      name.c_str(), s * 1e3, len / s, flops / s / 1e12, 100 * flops / s / peak);
  std::fflush(stdout);
}

}  // namespace

// The shapes VEGAS_BENCH_SHAPES asks for, as "CxB" and suffixes d (a sparse
// draft step) and f (the fp8 KV cache), e.g. "16384x16f"; empty when unset.
std::vector<std::string> requested_shapes() {
  std::vector<std::string> out;
  const char *env = std::getenv("VEGAS_BENCH_SHAPES");
  std::istringstream list(env ? env : "");
  for (std::string item; std::getline(list, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

#if defined(VEGAS_TIMELINE)
void tl_qkv_print(int marks);  // kernels/timeline.cuh
void tl_attn_print(int marks);
void tl_gemm_o_print(int marks);
#endif

int main(int argc, char **argv) {
  const std::string dir =
      argc > 1 ? argv[1] : std::string(VEGAS_SOURCE_DIR) + "/models/vegas-code-22m";
  const std::string qwen = argc > 2 ? argv[2] : "";
  try {
    std::vector<Row> rows;
    const std::vector<std::string> only = requested_shapes();
    double bw = 0.0, peak = 0.0;
    {
      const ModelConfig config = load_model_config(dir + "/config.json");
      auto store = WeightStore::open(dir);
      const ModelWeights weights = bind_model_weights(config, *store);
      auto model = create_cuda_backend(config, weights, CudaBackendOptions{});
      // The floor's bandwidth: the library's one measurement (as vegas bench).
      bw = model->measure_copy_bandwidth();
      peak = measure_gemm_flops();
      std::printf("device-to-device bandwidth %.0f GB/s, cuBLASLt bf16 GEMM %.0f TFLOP/s\n",
                  bw / 1e9, peak / 1e12);
      for (const std::string &shape : only) {
        int context = 0, batch = 0, used = 0;
        const bool parsed = std::sscanf(shape.c_str(), "%dx%d%n", &context, &batch, &used) == 2;
        const std::string suffix = parsed ? shape.substr(size_t(used)) : "";
        if (!parsed || context < 1 || batch < 1 ||
            suffix.find_first_not_of("df") != std::string::npos) {
          std::fprintf(stderr, "bench_cuda_decode: bad shape '%s' in VEGAS_BENCH_SHAPES\n",
                       shape.c_str());
          return 1;
        }
        const bool draft = suffix.find('d') != std::string::npos;
        const bool fp8 = suffix.find('f') != std::string::npos;
        rows.push_back(bench_decode(*model, "vegas-code-22m", context, batch, bw,
                                    draft ? kDraftRatio : 0.0, fp8));
      }
      if (only.empty()) {
        for (int context : {2048, 8192})
          for (int batch : {1, 16, 64}) {
            rows.push_back(bench_decode(*model, "vegas-code-22m", context, batch, bw));
            std::fflush(stdout);
          }
        rows.push_back(bench_decode(*model, "vegas-code-22m", 16384, 16, bw));
        rows.push_back(bench_decode(*model, "vegas-code-22m", 16384, 16, bw, 0.0, true));
        for (int context : {8192, 16384})
          rows.push_back(bench_decode(*model, "vegas-code-22m", context, 16, bw, kDraftRatio));
        report_prefill(*model, "vegas-code-22m", peak);
      }
    }
    if (!qwen.empty() && only.empty()) {
      const ModelConfig config = load_model_config(qwen);
      auto model = create_cuda_backend_synthetic(config, 42, CudaBackendOptions{});
      rows.push_back(bench_decode(*model, "qwen3-8b (synthetic)", 32768, 4, bw));
      rows.push_back(bench_decode(*model, "qwen3-8b (synthetic)", 32768, 4, bw, kDraftRatio));
      report_prefill(*model, "qwen3-8b (synthetic)", peak);
    }
    // VEGAS_BENCH_WEIGHTS=bf16,q8_0,q4_0,q4_k,q5_k,q6_k,q4_k_m,q5_k_m,fp8: the Qwen3-8B shapes at
    // batch 1 and 4, 2K and 32K, with the layer matrices in each weight format.
    if (const char *formats = std::getenv("VEGAS_BENCH_WEIGHTS"); formats && !qwen.empty()) {
      // VEGAS_BENCH_WEIGHT_BATCHES="1,4,8": the batch sizes of these rows (8
      // rows a step: what a one-sequence verification pass multiplies).
      const std::vector<int> weight_batches =
          bench::ints_from_env("VEGAS_BENCH_WEIGHT_BATCHES", {1, 4});
      const ModelConfig config = load_model_config(qwen);
      std::istringstream list(formats);
      for (std::string f; std::getline(list, f, ',');) {
        CudaBackendOptions o;
        o.synthetic_weights = bench::synthetic_weights_named(f);
        auto model = create_cuda_backend_synthetic(config, 42, o);
        const std::string name = "qwen3-8b " + f;
        for (int context : {2048, 32768})
          for (int batch : weight_batches)
            if (batch > 0) rows.push_back(bench_decode(*model, name, context, batch, bw));
        report_prefill(*model, name, peak);
      }
    }
    std::printf("\n%-28s %7s %6s %10s %10s %10s %10s %8s %10s\n", "model", "context", "batch",
                "step_ms", "tok/s", "MB/step", "floor_ms", "of_floor", "device_ms");
    for (const Row &r : rows)
      std::printf("%-28s %7d %6d %10.3f %10.0f %10.1f %10.3f %7.1f%% %10.3f\n", r.name.c_str(),
                  r.context, r.batch, r.step_s * 1e3, r.tok_s, r.bytes / 1e6, r.floor_s * 1e3,
                  100 * r.fraction, r.device_s * 1e3);
    // A sparse draft step against the dense step of the same shape.
    for (const Row &d : rows)
      for (const Row &v : rows)
        if (d.name == v.name + " draft" && d.context == v.context && d.batch == v.batch)
          std::printf("draft step / vanilla step (%s, %d x %d, ratio %.2f): %.3f (floor %.3f)\n",
                      v.name.c_str(), v.context, v.batch, kDraftRatio, d.step_s / v.step_s,
                      d.floor_s / v.floor_s);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "bench_cuda_decode: %s\n", e.what());
    return 1;
  }
#if defined(VEGAS_TIMELINE)
  tl_qkv_print(6);
  tl_attn_print(12);
  tl_gemm_o_print(3);
#endif
  return 0;
}
