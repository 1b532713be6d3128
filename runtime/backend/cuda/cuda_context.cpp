#include "backend/cuda/cuda_context.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "argmax.cuh"
#include "backend/cuda/cuda_event.h"
#include "backend/cuda/step_fields.h"
#include "backend/forward_batch_check.h"
#include "common/half_rows.h"
#include "decode_attention.cuh"
#include "embedding.cuh"
#include "feed_tokens.cuh"
#include "logit_candidates.cuh"
#include "mask_logits.cuh"
#include "model/rope.h"
#include "paged_attention.cuh"
#include "prefill_attention.cuh"
#include "qkv_rope.cuh"
#include "quest_select.cuh"
#include "random_fill.cuh"
#include "rmsnorm.cuh"
#include "rope_kv.cuh"
#include "sampling.cuh"
#include "sampling/sampling.h"
#include "small_gemm.cuh"
#include "swiglu.cuh"
#include "verify_attention.cuh"

namespace vegas::cuda {

namespace {

using kernels::bf16;

constexpr int64_t kSplitRowsCapacity = 4096;  // attention workspace: n_splits * rows
constexpr int32_t kMaxSplits = 64;
constexpr int64_t kPadRows = 16, kPadRowsBelow = 512, kPadRowsAbove = 256;  // padded_rows()
constexpr int32_t kMinTokensPerSplit = 128;
// Few-row steps of small models (kSmallModelHidden, cuda_weights.h) take
// small_gemm at up to this many rows (the tensor-core small_gemm covers 16 rows at
// the cost of one, and up to four 16-row tiles: all of them when every K fits
// it, else up to four rows on the CUDA-core kernel, which lost to cuBLASLt at
// 16 rows, 0.40 -> 0.61 ms). Four tiles against cuBLASLt and the separate
// norm / rope / SwiGLU kernels (H100, 22m): 8K x 64 1.114 -> 1.063 ms a step,
// 2K x 64 0.527 -> 0.462 ms.
// Up to eight tiles (128 rows: a verification of 16 sequences at gamma 6);
// VEGAS_CUDA_SMALL_GEMM_ROWS=64 .. kSmallGemmMmaMaxRows sets another limit
// (A/B timing).
int32_t small_gemm_rows() {
  static const int32_t rows = [] {
    const char *env = std::getenv("VEGAS_CUDA_SMALL_GEMM_ROWS");
    const int32_t n = env != nullptr ? std::atoi(env) : 0;
    return n >= 16 && n <= kernels::kSmallGemmMmaMaxRows ? n : 128;
  }();
  return rows;
}
constexpr int32_t kSmallGemmCudaCoreRows = 4;
// Sparse drafting is latency-bound: shorter splits than dense steps, of at
// least 256 keys (two block steps of the tensor-core decode kernel, 8 warps x
// 16 keys): at 128, sequences with a thousand selected keys made two blocks
// per multiprocessor of one step each, slower than one of two (README,
// session 19). VEGAS_CUDA_SPARSE_SPLIT_KEYS / VEGAS_CUDA_SPLIT_KEYS = 16 ..
// 4096 set other sizes for sparse and dense keys (A/B timing).
int32_t env_keys(const char *name, int32_t fallback) {
  const char *env = std::getenv(name);
  const int32_t n = env != nullptr ? std::atoi(env) : 0;
  return n >= 16 && n <= 4096 ? n : fallback;
}
// Splits of one (sequence, KV head) at most for the tensor-core decode kernel
// (few sequences of a small model): its last split block merges every split's
// partial results, so with one or two sequences at a long context "one wave"
// meant many short splits and a long merge (README, session 18). The CUDA-core
// kernel of larger models keeps its wave, counted in wide blocks for steps of
// few pairs (wide_decode_allowed), which makes its splits fewer.
// VEGAS_CUDA_MAX_SPLITS = 1 .. kMaxSplits sets another cap (A/B).
int32_t mma_decode_max_splits() {
  static const int32_t n = [] {
    const char *env = std::getenv("VEGAS_CUDA_MAX_SPLITS");
    const int32_t v = env != nullptr ? std::atoi(env) : 0;
    return v >= 1 && v <= kMaxSplits ? v : 32;
  }();
  return n;
}
// Whether a one-row step of few (sequence, KV head) pairs takes decode_attention's
// wide blocks (PagedAttentionParams::decode_wide): where four pairs a
// multiprocessor or fewer leave the four-warp kernel's one wave many short
// splits, or a warp a scheduler. choose_splits counts their own resident
// blocks. VEGAS_CUDA_DECODE_WIDE=0 never (A/B timing).
bool wide_decode_allowed() {
  static const bool allowed = kernels::variant_enabled("VEGAS_CUDA_DECODE_WIDE");
  return allowed;
}
// 0 unless VEGAS_CUDA_SPARSE_SPLIT_KEYS sets it; else sparse_split_keys asks the kernels.
int32_t sparse_split_keys_override() {
  static const int32_t keys = env_keys("VEGAS_CUDA_SPARSE_SPLIT_KEYS", 0);
  return keys;
}
int32_t dense_tokens_per_split() {
  static const int32_t keys = env_keys("VEGAS_CUDA_SPLIT_KEYS", kMinTokensPerSplit);
  return keys;
}

// Benchmark instrument (METHOD.md: time variants that leave a stage out):
// VEGAS_CUDA_ABLATE=qkv,attn,o,gateup,down,head drops those launches from
// every step, so a step's time without them, against the full step, is what
// they cost inside the chain of dependent launches; norm, rope and swiglu drop
// the separate RMSNorm, RoPE / cache-write and SwiGLU launches of larger
// models' layers. The outputs are garbage.
struct Ablation {
  bool qkv = false, attn = false, o = false, gate_up = false, down = false, head = false;
  bool norm = false, rope = false, swiglu = false;
};
const Ablation &ablation() {
  static const Ablation a = [] {
    Ablation r;
    const char *env = std::getenv("VEGAS_CUDA_ABLATE");
    const std::string list = env != nullptr ? std::string(",") + env + "," : "";
    auto has = [&](const char *what) {
      return list.find(std::string(",") + what + ",") != std::string::npos;
    };
    r.qkv = has("qkv");
    r.attn = has("attn");
    r.o = has("o");
    r.gate_up = has("gateup");
    r.down = has("down");
    r.head = has("head");
    r.norm = has("norm");
    r.rope = has("rope");
    r.swiglu = has("swiglu");
    return r;
  }();
  return a;
}

// A weight or norm of DeviceWeights (untyped device memory) as bf16.
const bf16 *bf(const void *p) {
  return reinterpret_cast<const bf16 *>(p);
}

// small_gemm's input side: normalised f32 rows (x_norm with norm_w) or bf16 rows x.
void small_gemm_input(kernels::SmallGemmParams &sg, const float *x_norm, const bf16 *norm_w,
                      const bf16 *x, const void *weight, int64_t k) {
  sg.x_f32 = x_norm;
  sg.norm_weight = norm_w;
  sg.x_bf16 = x;
  sg.w = bf(weight);
  sg.k = static_cast<int32_t>(k);
}

// y = rows · weightᵀ through small_gemm (sg holds the rows' count and index).
void small_linear(kernels::SmallGemmParams &sg, const float *x_norm, const bf16 *norm_w,
                  const bf16 *x, const void *weight, int64_t n, int64_t k,
                  kernels::SmallGemmParams::Epilogue epilogue, void *y, cudaStream_t stream) {
  small_gemm_input(sg, x_norm, norm_w, x, weight, k);
  sg.n = static_cast<int32_t>(n);
  sg.epilogue = epilogue;
  const bool f32_out = epilogue == kernels::SmallGemmParams::Epilogue::kAddF32 ||
                       epilogue == kernels::SmallGemmParams::Epilogue::kStoreF32;
  sg.y_bf16 = f32_out ? nullptr : static_cast<bf16 *>(y);
  sg.y_f32 = f32_out ? static_cast<float *>(y) : nullptr;
  check(kernels::small_gemm(sg, stream), "small_gemm");
}

template <typename T>
T *as(const DeviceBuffer &b) {
  return b.get<T>();
}

}  // namespace

CudaContext::CudaContext(const CudaBackendModel &model, const ContextParams &params)
    : model_(model), params_(params) {
  if (params_.num_pages <= 0 || params_.page_size <= 0 || params_.max_rows <= 0)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "CUDA context: num_pages " +
                                         std::to_string(params_.num_pages) + ", page_size " +
                                         std::to_string(params_.page_size) + " and max_rows " +
                                         std::to_string(params_.max_rows) + " must all be > 0");
  const int64_t slots = int64_t{params_.num_pages} * params_.page_size;
  if (slots > INT32_MAX)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "CUDA context: num_pages * page_size exceeds 2^31 slots");
  model_.activate();
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  const ModelConfig &c = model_.config();
  kv_ =
      std::make_unique<DeviceKvCache>(slots, c.n_layers, c.n_kv_heads, c.head_dim, params_.kv_fp8);

  const int64_t r = params_.max_rows;
  // Page tables plus room for one sequence's sparse record at up to 32K
  // selected positions per layer, so sparse drafting replays graphs without
  // reallocating (a larger batch grows the buffer once and re-captures).
  const int64_t sparse_room = (c.n_layers + 1) * std::min<int64_t>(slots, 1 << 15) + 2;
  grow_page_table(std::min<int64_t>(params_.num_pages, 1 << 16) + r + sparse_room);
  residual_.allocate(r * c.hidden_size * sizeof(float), "activations");
  normed_.allocate(r * c.hidden_size * sizeof(bf16), "activations");
  qkv_.allocate(r * (c.q_dim() + 2 * c.kv_dim()) * sizeof(bf16), "activations");
  q_.allocate(r * c.q_dim() * sizeof(bf16), "activations");
  attn_.allocate(r * c.q_dim() * sizeof(bf16), "activations");
  gate_up_.allocate(r * 2 * c.intermediate_size * sizeof(bf16), "activations");
  act_.allocate(r * c.intermediate_size * sizeof(bf16), "activations");
  logits_.allocate(r * c.vocab_size * sizeof(float), "logits");
  sampled_.allocate(r * sizeof(int32_t), "sampled ids");
  row_sampler_ = std::make_unique<DeviceRowSampler>(r);
  split_rows_capacity_ = std::max<int64_t>(kSplitRowsCapacity, r);
  partial_out_.allocate(split_rows_capacity_ * c.q_dim() * sizeof(float), "attention workspace");
  if (model_.weights().quantized) {
    int64_t largest = 0;  // elements of the largest quantized matrix
    auto count = [&](const QuantRows &q) { largest = std::max(largest, q.elements()); };
    for (const DeviceLayer &L : model_.weights().layers)
      for (const QuantRows *q : {&L.q_wqkv, &L.q_wo, &L.q_gate_up, &L.q_down}) count(*q);
    count(model_.weights().q_lm_head);
    dequant_.allocate(largest * 2, "dequantized weights");
  }
  partial_lse_.allocate(split_rows_capacity_ * c.n_heads * sizeof(float), "attention workspace");
  split_counters_.allocate(r * c.n_kv_heads * sizeof(int32_t), "attention split counters");
  check(cudaMemset(split_counters_.get(), 0, split_counters_.bytes()), "attention split counters");
  sampled_host_.reserve(r * sizeof(int32_t), "sampled ids");
  const int64_t cand_ints =
      kernels::CandidateLayout{static_cast<int32_t>(r), kMaxCandidateTopK}.ints();
  cand_k_.allocate(r * sizeof(int32_t), "logit candidates");
  cand_out_.allocate(cand_ints * sizeof(int32_t), "logit candidates");
  cand_k_host_.reserve(r * sizeof(int32_t), "logit candidates");
  cand_out_host_.reserve(cand_ints * sizeof(int32_t), "logit candidates");
  // A device-selected record holds up to every slot of the pool per layer.
  selection_ = std::make_unique<DeviceSelectionSets>(c.n_layers, slots);
  if (params_.key_bounds) {  // quest drafting
    if (!kernels::quest_select_supports(c.n_heads, c.head_dim))
      fail(VEGAS_ERR_UNSUPPORTED,
           "CUDA context: quest drafting supports queries of at most 12288 "
           "values and an even head_dim");
    const size_t bound_bytes =
        static_cast<size_t>(c.n_layers) * params_.num_pages * c.kv_dim() * sizeof(bf16);
    key_min_.allocate(bound_bytes, "quest key bounds");
    key_max_.allocate(bound_bytes, "quest key bounds");
    check(cudaMemsetAsync(key_min_.get(), 0, bound_bytes, stream_), "quest key bounds");
    check(cudaMemsetAsync(key_max_.get(), 0, bound_bytes, stream_), "quest key bounds");
  }
  // VEGAS_CUDA_TRACE=1: one line per forward call on stderr (launch shape,
  // host staging, device and wall time), for finding where a step's time goes.
  const char *trace = std::getenv("VEGAS_CUDA_TRACE");
  trace_ = trace != nullptr && trace[0] == '1';
  chain_ = std::make_unique<DeviceDraftChain>();
  check(cudaEventCreate(&trace_begin_), "cudaEventCreate");
  check(cudaEventCreate(&trace_forward_), "cudaEventCreate");
  check(cudaEventCreate(&trace_end_), "cudaEventCreate");
  if (params_.warm_rows > 0) warm_gemm_plans(std::min(params_.warm_rows, params_.max_rows));
}

// A pass of up to 128 rows reads the weights and each sequence's KV once,
// like a one-row step: the fused small GEMMs of small models take up to
// small_gemm_rows() (128; above it a 22m verify pass slowed by a third), and
// larger models' passes are bound by their weights' bytes at such rows.
int32_t CudaContext::cheap_pass_rows() const {
  return std::min<int32_t>(small_gemm_rows(), 128);
}

// Whether a step of `rows` rows runs its linear layers as kernels::small_gemm
// (RMSNorm, residual add and SwiGLU fused in) instead of cuBLASLt.
bool CudaContext::fused_linear(int32_t rows) const {
  const ModelConfig &c = model_.config();
  if (model_.weights().quantized) return false;  // small_gemm reads bf16 weights
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const bool mma_k = std::max<int64_t>({H, c.q_dim(), I}) <= kernels::kSmallGemmMmaMaxK;
  return rows <= (mma_k ? small_gemm_rows() : kSmallGemmCudaCoreRows) && H <= kSmallModelHidden &&
         kernels::small_gemm_supports(rows, static_cast<int32_t>(H)) &&
         kernels::small_gemm_supports(rows, c.q_dim()) &&
         kernels::small_gemm_supports(rows, static_cast<int32_t>(I));
}

// Steps of up to this many rows multiply quantized weights with quant_gemv,
// which reads them once a launch: up to 32 rows on the tensor cores, 8 for
// F8 or on the CUDA cores (at 32 rows 4 x 0.53 of the bf16 bytes for Q8_0,
// against dequantizing, 0.53 read + 1 written, before cuBLASLt reads the
// bf16 copy, 1).
constexpr int64_t kQuantGemvRowsMax = 32;

namespace {

// Quantized matrices take the tensor cores for a step of two or more rows
// (all its launches, so that a row sums alike in every launch of 2-32 rows),
// the CUDA cores for one row (a decode step of one sequence), where they are
// the faster.
bool quant_tensor_cores(int64_t rows) {
  return rows >= 2;
}

// Whether a quantized gate|up matrix may fuse SwiGLU into its GEMV
// (QuantGemvParams::swiglu_up, CudaContext::run_gate_up);
// VEGAS_CUDA_FUSED_SWIGLU=0 never (A/B timing).
bool fused_swiglu_allowed() {
  static const bool allowed = kernels::variant_enabled("VEGAS_CUDA_FUSED_SWIGLU");
  return allowed;
}

}  // namespace

void CudaContext::run_linear(const void *x, const void *w, const QuantRows &q, void *y, bool y_f32,
                             bool accumulate, int64_t rows, int64_t gemm_m, int64_t n, int64_t k) {
  if (q.empty()) {
    gemm_.run(x, w, y, y_f32, accumulate, gemm_m, n, k, stream_);
    return;
  }
  bool gemv = rows <= kQuantGemvRowsMax;
  for (int i = 0; i < q.n_parts; ++i)
    gemv = gemv && kernels::quant_gemv_supports(q.part[i].format, 1, static_cast<int32_t>(k));
  if (gemv) {
    // Each part writes its columns of y (ldy n), as many rows a launch as
    // its format takes.
    for (int i = 0; i < q.n_parts; ++i) {
      const int64_t chunk =
          kernels::quant_gemv_max_rows(q.part[i].format, quant_tensor_cores(rows));
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        kernels::QuantGemvParams p;
        p.w = q.part[i];
        p.x = static_cast<const bf16 *>(x) + r0 * k;
        p.m = static_cast<int32_t>(std::min<int64_t>(chunk, rows - r0));
        p.ldy = static_cast<int32_t>(n);
        if (y_f32)
          p.y_f32 = static_cast<float *>(y) + r0 * n + q.row0[i];
        else
          p.y_bf16 = static_cast<bf16 *>(y) + r0 * n + q.row0[i];
        p.accumulate = accumulate;
        p.tensor_cores = quant_tensor_cores(rows);
        check(kernels::quant_gemv(p, stream_), "quant_gemv");
      }
    }
    return;
  }
  for (int i = 0; i < q.n_parts; ++i) {
    kernels::QuantDequantizeParams dp;
    dp.w = q.part[i];
    dp.out = as<bf16>(dequant_) + int64_t{q.row0[i]} * k;
    check(kernels::quant_dequantize(dp, stream_), "quant_dequantize");
  }
  gemm_.run(x, dequant_.get(), y, y_f32, accumulate, gemm_m, n, k, stream_);
}

// cuBLASLt's first GEMM of a shape chooses its algorithm and loads its kernel:
// in a Vegas session that landed in the first verification passes (22m, 64
// sequences at gamma 6, H200: a first round of 14.9 ms, later ones 3.2 ms).
// Each GEMM of a step of up to `rows` rows that takes cuBLASLt runs once here,
// on the context's own buffers (scratch between steps), for every padded row
// count; the plans stay cached in gemm_.
void CudaContext::warm_gemm_plans(int32_t rows) {
  const ModelConfig &c = model_.config();
  const DeviceWeights &w = model_.weights();
  const DeviceLayer &L = w.layers.front();
  const int64_t H = c.hidden_size, QKV = c.q_dim() + 2 * c.kv_dim(), I = c.intermediate_size;
  // A quantized matrix takes cuBLASLt on its dequantized copy: the same plan.
  auto weight = [&](const void *bf, const QuantRows &q) { return q.empty() ? bf : dequant_.get(); };
  for (int64_t r = 1; r <= rows; r = padded_rows(r) + 1) {
    const int64_t m = padded_rows(r);
    if (fused_linear(static_cast<int32_t>(m))) continue;  // no cuBLASLt at this size
    gemm_.run(normed_.get(), weight(L.wqkv, L.q_wqkv), qkv_.get(), false, false, m, QKV, H,
              stream_);
    gemm_.run(attn_.get(), weight(L.wo, L.q_wo), residual_.get(), true, true, m, H, c.q_dim(),
              stream_);
    gemm_.run(normed_.get(), weight(L.w_gate_up, L.q_gate_up), gate_up_.get(), false, false, m,
              2 * I, H, stream_);
    gemm_.run(act_.get(), weight(L.w_down, L.q_down), residual_.get(), true, true, m, H, I,
              stream_);
    gemm_.run(normed_.get(), weight(w.lm_head, w.q_lm_head), logits_.get(), true, false, m,
              c.vocab_size, H, stream_);
  }
  check(cudaStreamSynchronize(stream_), "GEMM warm-up");
}

CudaContext::~CudaContext() {
  graphs_.clear();
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  if (trace_begin_) cudaEventDestroy(trace_begin_);
  if (trace_forward_) cudaEventDestroy(trace_forward_);
  if (trace_end_) cudaEventDestroy(trace_end_);
  if (replay_uploaded_) cudaEventDestroy(replay_uploaded_);
}

void CudaContext::forget_selection(int32_t key) {
  selection_->forget(key);
}

double CudaContext::take_select_seconds() {
  return selection_->take_seconds();
}

void CudaContext::select_deferred(const std::vector<DeferredSelect> &items) {
  model_.activate();
  const ModelConfig &c = model_.config();
  selection_->launch_deferred(stream_, items, as<kernels::f16>(cap_logits_), as<float>(cap_lse_),
                              c.n_layers, c.n_heads);
}

void CudaContext::grow_quest_keys(int32_t n_seqs) {
  if (n_seqs <= quest_key_rows_) return;
  graphs_.clear();  // graphs hold the old address
  check(cudaStreamSynchronize(stream_), "stream sync");
  quest_key_rows_ = std::max(n_seqs, 2 * quest_key_rows_);
  quest_keys_.allocate(static_cast<size_t>(quest_key_rows_) * params_.num_pages * sizeof(uint32_t),
                       "quest page scores");
}

void CudaContext::enqueue_quest_bounds(const int32_t *pages, int32_t n_listed) {
  if (!params_.key_bounds) return;
  const ModelConfig &c = model_.config();
  kernels::QuestBoundsParams bp;
  bp.k_cache = kv_->k(0);
  bp.k_layer_stride = kv_->layer_elements();
  bp.k_scale = kv_->k_scale(0);
  bp.k_scale_layer_stride = kv_->scale_layer_stride();
  bp.head_dim = c.head_dim;
  bp.key_min = as<bf16>(key_min_);
  bp.key_max = as<bf16>(key_max_);
  bp.num_pages = params_.num_pages;
  bp.pages = pages;
  bp.n_listed = n_listed;
  bp.n_layers = c.n_layers;
  bp.page_size = params_.page_size;
  bp.kv_dim = static_cast<int32_t>(c.kv_dim());
  check(kernels::quest_bounds(bp, stream_), "quest_bounds");
}

void CudaContext::grow_page_table(int64_t pages) {
  if (pages <= page_capacity_) return;
  graphs_.clear();  // graphs hold the old address
  page_capacity_ = std::max(pages, page_capacity_ * 2);
  const size_t bytes = (kFields * int64_t{params_.max_rows} + page_capacity_) * sizeof(int32_t);
  if (stream_) check(cudaStreamSynchronize(stream_), "stream sync");
  tables_.forget();
  meta_dev_.allocate(bytes, "staged indices");
  meta_host_.reserve(bytes, "staged indices");
}

int32_t *CudaContext::meta(const Step &s, int field) const {
  return meta_dev_.get<int32_t>() + int64_t{field} * s.field_stride;
}

int32_t *CudaContext::tables() const {
  return meta_dev_.get<int32_t>() + int64_t{kFields} * params_.max_rows;
}

// cuBLASLt picks an algorithm per GEMM shape on first use (milliseconds of
// host time: H100, verification steps with a new row count took 5-7 ms
// instead of 0.8, and 13-19 ms for the five GEMM shapes of an 8-layer model
// in the rounds where sequences of a 64-batch finished one after another).
// Row counts are rounded up to a power of two below kPadRowsBelow (at least
// kPadRows) and to a multiple of kPadRowsAbove from there, so a session meets
// a dozen shapes; the extra rows compute on stale activations and are never
// read (rows are independent in a GEMM).
int64_t CudaContext::padded_rows(int64_t rows) const {
  int64_t padded = kPadRows;
  while (padded < rows && padded < kPadRowsBelow) padded *= 2;
  if (padded < rows) padded = (rows + kPadRowsAbove - 1) / kPadRowsAbove * kPadRowsAbove;
  return std::min<int64_t>(padded, params_.max_rows);
}

bool CudaContext::wide_decode(const Step &s) const {
  const ModelConfig &c = model_.config();
  return wide_decode_allowed() && s.max_rows_per_seq == 1 &&
         int64_t{s.n_seqs} * c.n_kv_heads * 4 <= model_.multiprocessors();
}

int32_t CudaContext::choose_splits(const Step &s, int64_t useful_splits) const {
  const ModelConfig &c = model_.config();
  const int32_t group = c.n_heads / c.n_kv_heads;
  const int32_t q_tile = s.max_rows_per_seq * group <= 16 ? 16 : 64;
  const int32_t rows_per_tile = q_tile / group;
  const int64_t blocks =
      int64_t{s.n_seqs} * c.n_kv_heads * ((s.max_rows_per_seq + rows_per_tile - 1) / rows_per_tile);
  // One wave: as many blocks as the decode kernel keeps resident at once
  // (decode_attention_resident_blocks), no more splits than the longest
  // sequence can use; a power of two so graphs see few distinct values. A
  // second wave was slower (H100, 22m 8K x 16: 0.485 ms a step at eight
  // blocks per multiprocessor, 0.442 at four), each block paying its start
  // and its merge again for fewer keys. Rows the decode kernel does not take
  // (verification, prefill chunks) count the verify kernel's blocks.
  kernels::PagedAttentionParams probe;
  probe.n_seqs = s.n_seqs;
  probe.n_heads = c.n_heads;
  probe.n_kv_heads = c.n_kv_heads;
  probe.head_dim = c.head_dim;
  probe.max_rows_per_seq = s.max_rows_per_seq;
  probe.sparse_step = s.sparse ? 1 : 0;
  // Sparse steps on fp8 caches keep two blocks a multiprocessor (the bf16
  // kernel's deep stages are for bf16 caches only).
  probe.k_scale = s.sparse ? kv_->k_scale(0) : nullptr;
  probe.verify_max_rows = kernels::kVerifyMaxRows;
  const bool decode_kernel = s.cap_slots == 0 && kernels::decode_attention_applies(probe);
  const bool wide =
      decode_kernel && wide_decode(s) && !kernels::decode_attention_mma_applies(probe);
  const int64_t per_sm = wide            ? kernels::decode_attention_wide_resident_blocks(probe)
                         : decode_kernel ? kernels::decode_attention_resident_blocks(probe)
                                         : kernels::verify_attention_resident_blocks(probe);
  int64_t want = (per_sm * model_.multiprocessors() + blocks - 1) / blocks;
  want = std::min<int64_t>(want, useful_splits);
  // The verify warps kernel's warps each take 16 keys a step: a split of a
  // few hundred keys leaves them one or two steps, all start-up and merge
  // (few sequences, many splits: slower than the tiled kernel).
  if (!decode_kernel && kernels::verify_attention_warps_applies(probe))
    want = std::min<int64_t>(want, std::max<int64_t>(1, useful_splits * dense_tokens_per_split() /
                                                            kernels::kVerifyWarpsMinKeysPerSplit));
  want = std::min<int64_t>(want, kMaxSplits);
  if (decode_kernel && kernels::decode_attention_mma_applies(probe))
    want = std::min<int64_t>(
        {want, int64_t{mma_decode_max_splits()}, kernels::decode_attention_mma_max_splits(probe)});
  want = std::min<int64_t>(want, split_rows_capacity_ / s.rows);
  int32_t splits = 1;
  while (splits * 2 <= want) splits *= 2;
  return splits;
}

// Keys per split of a sparse set in step st: what the decode kernel's stages
// take at once (kernels::decode_attention_sparse_split_keys).
int32_t CudaContext::sparse_split_keys(const Step &st) const {
  if (sparse_split_keys_override() > 0) return sparse_split_keys_override();
  const ModelConfig &c = model_.config();
  kernels::PagedAttentionParams probe;
  probe.n_seqs = st.n_seqs;
  probe.n_heads = c.n_heads;
  probe.n_kv_heads = c.n_kv_heads;
  probe.head_dim = c.head_dim;
  probe.max_rows_per_seq = 1;
  probe.sparse_step = st.sparse ? 1 : 0;  // every sequence on a selected set
  probe.k_scale = kv_->k_scale(0);
  return kernels::decode_attention_sparse_split_keys(probe);
}

int64_t CudaContext::useful_splits_of(const SeqRows &s, int32_t sparse_keys) const {
  // Dense ranges of at least dense_tokens_per_split() keys, a sparse set's
  // of sparse_keys (sparse_split_keys of the step).
  const ModelConfig &c = model_.config();
  int64_t n_keys = int64_t{s.start_pos} + s.n_tokens;
  int64_t per_split = dense_tokens_per_split();
  if (s.device_sparse_key >= 0 && s.device_sparse_span > 0) {
    n_keys = std::min<int64_t>(n_keys, s.device_sparse_span);
    per_split = sparse_keys;
  }
  if (s.sparse) {
    per_split = sparse_keys;
    int32_t most = 0;
    for (int32_t l = 0; l < c.n_layers; ++l) most = std::max(most, s.sparse->counts[l]);
    n_keys = std::min<int64_t>(n_keys, int64_t{most} + s.start_pos + s.n_tokens - s.sparse->prefix);
  }
  if (s.quest) {
    per_split = sparse_keys;
    n_keys = std::min<int64_t>(n_keys, std::min(s.quest->budget, s.quest->prefix) +
                                           int64_t{s.start_pos} + 1 - s.quest->prefix);
  }
  return (n_keys + per_split - 1) / per_split;
}

kernels::PagedAttentionParams CudaContext::attention_params(const Step &s,
                                                            AttentionRoutes *routes) const {
  const ModelConfig &c = model_.config();
  kernels::PagedAttentionParams ap;
  ap.q = as<bf16>(q_);
  ap.out = as<bf16>(attn_);
  ap.page_table = tables();
  ap.seq_page_off = meta(s, kSeqPageOff);
  ap.seq_row_start = meta(s, kSeqRowStart);
  ap.seq_n_rows = meta(s, kSeqRows);
  ap.seq_start_pos = meta(s, kSeqStartPos);
  ap.n_seqs = s.n_seqs;
  ap.n_heads = c.n_heads;
  ap.n_kv_heads = c.n_kv_heads;
  ap.head_dim = c.head_dim;
  ap.page_size = params_.page_size;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  ap.max_rows_per_seq = s.max_rows_per_seq;
  ap.n_splits = s.n_splits;
  ap.max_keys = s.max_keys;
  ap.decode_wide = wide_decode(s) ? 1 : 0;  // taken by the CUDA-core kernel only
  ap.partial_out = as<float>(partial_out_);
  ap.partial_lse = as<float>(partial_lse_);
  ap.split_counters = as<int32_t>(split_counters_);
  // Not when quest_select writes records inside the step, nor when a captured
  // tail attends to its front's keys, which this step's qkv pass writes.
  ap.read_ahead = s.quest || s.split_tail ? 0 : 1;
  ap.sparse_step = s.sparse ? 1 : 0;
  ap.total_rows = s.rows;
  ap.sparse_data = tables();
  ap.sparse_device = selection_->records();
  ap.seq_sparse_off = meta(s, kSeqSparseOff);
  ap.n_layers = c.n_layers;
  ap.row_cap_slot = meta(s, kRowCapSlot);
  ap.seq_cap_cand = meta(s, kSeqCapCand);
  ap.cap_stride = s.cap_stride;
  ap.seq_tree_off = s.trees ? meta(s, kSeqTreeOff) : nullptr;
  ap.tree_data = tables();
  *routes = attention_routes(s, ap);
  return ap;
}

CudaContext::AttentionRoutes CudaContext::attention_routes(
    const Step &s, kernels::PagedAttentionParams &ap) const {
  const ModelConfig &c = model_.config();
  // Dense sequences of many rows take the tensor-core kernel, launched after
  // the paged one, which skips them; captured rows never are among them
  // (stage splits them off: capture_split).
  bool paged_rows = true;   // whether the paged kernel has any sequence left
  bool merge_only = false;  // none, but verify_attention's splits need its merge
  if (s.max_rows_per_seq >= kernels::kPrefillMinRows &&
      kernels::prefill_attention_supports(c.head_dim, c.n_heads / c.n_kv_heads)) {
    ap.prefill_min_rows = kernels::kPrefillMinRows;
    const int32_t *h = meta_host_.get<int32_t>();
    const int64_t R = s.field_stride;
    paged_rows = false;
    for (int32_t i = 0; i < s.n_seqs; ++i)
      paged_rows = paged_rows || h[kSeqRows * R + i] < kernels::kPrefillMinRows ||
                   h[kSeqSparseOff * R + i] != -1 || h[kSeqCapCand * R + i] != 0 ||
                   h[kSeqTreeOff * R + i] != -1;
  }
  // Dense sequences of 2..64 rows (verification, captured or not) take the
  // tensor-core verify kernel, launched before the paged one, which skips them
  // but must still run its merge when there are splits (defers_to_verify),
  // unless the verify kernel merges them itself.
  if (s.max_rows_per_seq >= 2 &&
      kernels::verify_attention_supports(c.head_dim, c.n_heads / c.n_kv_heads)) {
    const int32_t *h = meta_host_.get<int32_t>();
    const int64_t R = s.field_stride;
    bool other_rows = false, one_row = false;
    int32_t verify_rows = 0;  // the most rows of a sequence the verify kernel takes
    for (int32_t i = 0; i < s.n_seqs; ++i) {
      const int32_t n = h[kSeqRows * R + i];
      if (n == 0) continue;  // graph padding
      // A tree part-way (a draft level) needs the paged kernel's masks; a
      // whole one (its base at start_pos) is verified like a chain
      // (defers_to_verify).
      const int32_t tree_off = h[kSeqTreeOff * R + i];
      const bool tree = tree_off != -1;
      if (tree && h[kFields * int64_t{params_.max_rows} + tree_off] != h[kSeqStartPos * R + i]) {
        other_rows = true;
        continue;
      }
      const bool dense = h[kSeqSparseOff * R + i] == -1;
      if (dense && !tree && ap.prefill_min_rows > 0 && n >= ap.prefill_min_rows &&
          h[kSeqCapCand * R + i] == 0)
        continue;
      // One-row dense sequences go with the verified ones when there are any
      // (defers_to_verify).
      if (dense && n == 1) {
        one_row = true;
        continue;
      }
      const bool verify = dense && n >= 2 && n <= kernels::kVerifyMaxRows;
      if (verify) verify_rows = std::max(verify_rows, n);
      other_rows = other_rows || !verify;
    }
    other_rows = other_rows || (one_row && verify_rows == 0);
    // The longest verified sequence, not the step's longest (a prefill front
    // next to a captured two-row tail), sizes the verify kernel's blocks: the
    // tail then takes the warps kernel, not 64-vector tiles for 8 vectors
    // (H100, 22m, 8K prompt: 250 us a layer). No dense sequence has rows
    // between it and kVerifyMaxRows, so defers_to_verify picks the same ones.
    if (verify_rows > 0) ap.verify_max_rows = verify_rows;
    paged_rows = other_rows;
    merge_only = !other_rows && verify_rows > 0 && s.n_splits > 1 &&
                 !kernels::verify_attention_merges_splits(ap);
  }
  return AttentionRoutes{paged_rows, merge_only};
}

// The launch parameters a step's layers share: layer_launch builds them
// once, and each layer sets its own weights and cache pointers.
struct CudaContext::LayerLaunch {
  kernels::RmsNormParams norm;
  kernels::RopeKvParams rope;
  kernels::PagedAttentionParams attn;
  AttentionRoutes routes;
  int64_t cap_layer = 0;  // captured scores of one layer, in lines
  kernels::QuestSelectParams quest;
  int64_t bounds_layer = 0;  // quest key bounds of one layer
  kernels::SwigluParams swiglu;
  kernels::SmallGemmParams sg;
  // A few rows on a small model (decoding, drafting): the linear layers run
  // as small_gemm with the RMSNorms, residual adds and SwiGLU fused in, which
  // removes three launches per layer and cuBLASLt's small-M overhead; large
  // models keep cuBLASLt, where each GEMM is a long bandwidth-bound kernel.
  bool small = false;
  // ... and the qkv projection carries rope_kv's stage in its epilogue
  // (kernels/qkv_rope.cuh); VEGAS_CUDA_FUSED_QKV=0 keeps them apart (A/B timing).
  bool fused_qkv = false;
  int64_t gemm_m = 0;  // cuBLASLt's padded rows
};

CudaContext::LayerLaunch CudaContext::layer_launch(const Step &s) const {
  const ModelConfig &c = model_.config();
  LayerLaunch L;
  L.norm.x = as<float>(residual_);
  L.norm.out = as<bf16>(normed_);
  L.norm.rows = s.rows;
  L.norm.hidden = c.hidden_size;
  L.norm.eps = static_cast<float>(c.rms_norm_eps);

  kernels::RopeKvParams &rp = L.rope;
  rp.qkv = as<bf16>(qkv_);
  rp.norm_eps = static_cast<float>(c.rms_norm_eps);
  rp.positions = meta(s, kPositions);
  rp.slots = meta(s, kSlots);
  rp.inv_freq = model_.weights().rope_inv_freq;
  rp.rot_dim = c.rotary_dim();
  rp.attention_scaling = rope_attention_scaling(c);
  rp.q_out = as<bf16>(q_);
  rp.rows = s.rows;
  rp.n_heads = c.n_heads;
  rp.n_kv_heads = c.n_kv_heads;
  rp.head_dim = c.head_dim;

  L.attn = attention_params(s, &L.routes);
  L.cap_layer = int64_t{s.cap_slots} * c.n_heads;

  kernels::QuestSelectParams &qp = L.quest;  // quest drafting: each layer's sets, from its queries
  qp.q = as<bf16>(q_);
  qp.page_table = tables();
  qp.seq_page_off = meta(s, kSeqPageOff);
  qp.seq_row_start = meta(s, kSeqRowStart);
  qp.seq_prefix = meta(s, kSeqQuestPrefix);
  qp.seq_budget = meta(s, kSeqQuestBudget);
  qp.seq_record_off = meta(s, kSeqSparseOff);
  qp.records = tables();
  qp.keys = quest_keys_.get<uint32_t>();
  qp.key_stride = params_.num_pages;
  qp.n_seqs = s.n_seqs;
  qp.n_heads = c.n_heads;
  qp.n_kv_heads = c.n_kv_heads;
  qp.head_dim = c.head_dim;
  qp.page_size = params_.page_size;
  qp.n_layers = c.n_layers;
  L.bounds_layer = int64_t{params_.num_pages} * c.kv_dim();

  L.swiglu.gate_up = as<bf16>(gate_up_);
  L.swiglu.out = as<bf16>(act_);
  L.swiglu.rows = s.rows;
  L.swiglu.inter = c.intermediate_size;

  L.small = fused_linear(s.rows);
  L.sg.m = s.rows;
  L.sg.eps = static_cast<float>(c.rms_norm_eps);
  static const bool fused_qkv_enabled = kernels::variant_enabled("VEGAS_CUDA_FUSED_QKV");
  L.fused_qkv =
      L.small && fused_qkv_enabled &&
      kernels::qkv_rope_mma_supports(s.rows, static_cast<int32_t>(c.hidden_size), c.head_dim);
  L.gemm_m = padded_rows(s.rows);
  return L;
}

// The qkv projection of layer l and its rope / q-k norm / cache write.
void CudaContext::enqueue_qkv(LayerLaunch &L, const Step &s, int32_t l) {
  const ModelConfig &c = model_.config();
  const DeviceLayer &w = model_.weights().layers[static_cast<size_t>(l)];
  const int64_t H = c.hidden_size, QKV = c.q_dim() + 2 * c.kv_dim();
  kernels::RopeKvParams &rp = L.rope;
  rp.bias = bf(w.bqkv);
  rp.q_norm = bf(w.q_norm);
  rp.k_norm = bf(w.k_norm);
  rp.k_cache = kv_->k(l);
  rp.v_cache = kv_->v(l);
  rp.k_scale = kv_->k_scale(l);
  rp.v_scale = kv_->v_scale(l);
  if (ablation().qkv) return;
  if (L.fused_qkv) {
    small_gemm_input(L.sg, as<float>(residual_), bf(w.attn_norm), nullptr, w.wqkv, H);
    check(kernels::qkv_rope_mma(L.sg, rp, stream_), "qkv_rope_mma");
    return;
  }
  if (L.small) {
    small_linear(L.sg, as<float>(residual_), bf(w.attn_norm), nullptr, w.wqkv, QKV, H,
                 kernels::SmallGemmParams::Epilogue::kStoreBf16, qkv_.get(), stream_);
  } else {
    L.norm.weight = bf(w.attn_norm);
    if (!ablation().norm) check(kernels::rmsnorm(L.norm, stream_), "attention rmsnorm");
    run_linear(normed_.get(), w.wqkv, w.q_wqkv, qkv_.get(), false, false, s.rows, L.gemm_m, QKV, H);
  }
  if (!ablation().rope) check(kernels::rope_kv(rp, stream_), "rope_kv");
}

// Layer l's attention: quest's sets first, then each kernel the step's rows take.
void CudaContext::enqueue_attention(LayerLaunch &L, const Step &s, int32_t l) {
  if (s.quest) {
    L.quest.k_cache = L.rope.k_cache;
    L.quest.k_scale = L.rope.k_scale;
    L.quest.key_min = as<bf16>(key_min_) + l * L.bounds_layer;
    L.quest.key_max = as<bf16>(key_max_) + l * L.bounds_layer;
    L.quest.layer = l;
    check(kernels::quest_select(L.quest, stream_), "quest_select");
  }
  kernels::PagedAttentionParams &ap = L.attn;
  ap.k_cache = L.rope.k_cache;
  ap.v_cache = L.rope.v_cache;
  ap.k_scale = L.rope.k_scale;
  ap.v_scale = L.rope.v_scale;
  ap.layer = l;
  ap.cap_logits =
      s.cap_slots ? as<kernels::f16>(cap_logits_) + l * L.cap_layer * s.cap_stride : nullptr;
  ap.cap_lse = s.cap_slots ? as<float>(cap_lse_) + l * L.cap_layer : nullptr;
  const bool decode_rows = !ablation().attn;  // VEGAS_CUDA_ABLATE=attn leaves prefill rows
  if (decode_rows && ap.verify_max_rows > 0)
    check(kernels::verify_attention(ap, stream_), "verify_attention");
  if (decode_rows && L.routes.paged)
    check(kernels::paged_attention(ap, stream_), "paged_attention");
  if (decode_rows && L.routes.merge_only)
    check(kernels::paged_attention_merge(ap, stream_), "attention merge");
  if (ap.prefill_min_rows > 0) {
    kernels::PagedAttentionParams pp = ap;  // its rows capture nothing
    pp.cap_logits = nullptr;
    pp.cap_lse = nullptr;
    check(kernels::prefill_attention(pp, stream_), "prefill_attention");
  }
}

// Where the matrix stays quantized in a format that fuses SwiGLU and the step
// has two or more rows, quant_gemv launches of up to quant_gemv_max_rows write act_ (no
// gate_up_ round trip, no swiglu launch); else run_linear into gate_up_, then
// swiglu. At one row the fused launch measured slower (its blocks read the
// gate and up halves as two streams), at four rows faster (the commit has the
// timings).
void CudaContext::run_gate_up(const LayerLaunch &L, const Step &s, const DeviceLayer &w) {
  const int64_t H = model_.config().hidden_size, I = model_.config().intermediate_size;
  kernels::QuantMatrix gate, up;
  const bool fused = fused_swiglu_allowed() && s.rows >= 2 && s.rows <= kQuantGemvRowsMax &&
                     w.q_gate_up.rows_view(0, I, &gate) && w.q_gate_up.rows_view(I, I, &up) &&
                     gate.format == up.format && kernels::quant_gemv_swiglu_supports(gate.format) &&
                     kernels::quant_gemv_supports(gate.format, 1, static_cast<int32_t>(H));
  if (!fused) {
    run_linear(normed_.get(), w.w_gate_up, w.q_gate_up, gate_up_.get(), false, false, s.rows,
               L.gemm_m, 2 * I, H);
    if (!ablation().swiglu) check(kernels::swiglu(L.swiglu, stream_), "swiglu");
    return;
  }
  const int64_t chunk = kernels::quant_gemv_max_rows(gate.format, quant_tensor_cores(s.rows));
  for (int64_t r0 = 0; r0 < s.rows; r0 += chunk) {
    kernels::QuantGemvParams p;
    p.w = gate;
    p.swiglu_up = up;
    p.x = as<bf16>(normed_) + r0 * H;
    p.m = static_cast<int32_t>(std::min<int64_t>(chunk, s.rows - r0));
    p.y_bf16 = as<bf16>(act_) + r0 * I;
    p.tensor_cores = quant_tensor_cores(s.rows);
    check(kernels::quant_gemv(p, stream_), "quant_gemv with SwiGLU");
  }
}

// Layer l's o projection and MLP, each adding into the residual.
void CudaContext::enqueue_mlp(LayerLaunch &L, const Step &s, int32_t l) {
  const ModelConfig &c = model_.config();
  const DeviceLayer &w = model_.weights().layers[static_cast<size_t>(l)];
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  if (L.small) {
    using Epilogue = kernels::SmallGemmParams::Epilogue;
    const Ablation &ab = ablation();
    if (!ab.o)
      small_linear(L.sg, nullptr, nullptr, as<bf16>(attn_), w.wo, H, c.q_dim(), Epilogue::kAddF32,
                   residual_.get(), stream_);
    if (!ab.gate_up)
      small_linear(L.sg, as<float>(residual_), bf(w.mlp_norm), nullptr, w.w_gate_up, I, H,
                   Epilogue::kSwiglu, act_.get(), stream_);
    if (!ab.down)
      small_linear(L.sg, nullptr, nullptr, as<bf16>(act_), w.w_down, H, I, Epilogue::kAddF32,
                   residual_.get(), stream_);
    return;
  }
  run_linear(attn_.get(), w.wo, w.q_wo, residual_.get(), true, true, s.rows, L.gemm_m, H,
             c.q_dim());
  L.norm.weight = bf(w.mlp_norm);
  if (!ablation().norm) check(kernels::rmsnorm(L.norm, stream_), "mlp rmsnorm");
  run_gate_up(L, s, w);
  run_linear(act_.get(), w.w_down, w.q_down, residual_.get(), true, true, s.rows, L.gemm_m, H, I);
}

void CudaContext::enqueue(const Step &s, bool with_argmax) {
  const ModelConfig &c = model_.config();
  kernels::EmbeddingParams ep;
  ep.tokens = meta(s, kTokens);
  ep.table = bf(model_.weights().embed);
  ep.out = as<float>(residual_);
  ep.rows = s.rows;
  ep.hidden = c.hidden_size;
  ep.vocab = c.vocab_size;
  check(kernels::embedding_gather(ep, stream_), "embedding");

  LayerLaunch L = layer_launch(s);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    enqueue_qkv(L, s, l);
    enqueue_attention(L, s, l);
    enqueue_mlp(L, s, l);
  }
  // No quest row of this step reads a page it wrote (each writes at or after
  // its prefix), so the bounds can follow once, after every layer.
  enqueue_quest_bounds(meta(s, kWrittenPage), s.rows);
  enqueue_logits(s, L.small, L.sg, with_argmax);
}

void CudaContext::enqueue_logits(const Step &s, bool small, kernels::SmallGemmParams &sg,
                                 bool with_argmax) {
  if (s.logit_rows == 0) return;
  const ModelConfig &c = model_.config();
  const DeviceWeights &w = model_.weights();
  const int64_t H = c.hidden_size;
  if (ablation().head) {
  } else if (small && kernels::small_gemm_supports(s.logit_rows, static_cast<int32_t>(H))) {
    // The final RMSNorm of the logit rows fused into the lm_head.
    sg.m = s.logit_rows;
    sg.x_row_index = meta(s, kLogitIndex);
    small_linear(sg, as<float>(residual_), bf(w.final_norm), nullptr, w.lm_head, c.vocab_size, H,
                 kernels::SmallGemmParams::Epilogue::kStoreF32, logits_.get(), stream_);
    sg.x_row_index = nullptr;
  } else {
    kernels::RmsNormParams np;
    np.x = as<float>(residual_);
    np.out = as<bf16>(normed_);
    np.hidden = c.hidden_size;
    np.eps = static_cast<float>(c.rms_norm_eps);
    np.weight = bf(w.final_norm);
    np.row_index = meta(s, kLogitIndex);
    np.rows = s.logit_rows;
    check(kernels::rmsnorm(np, stream_), "final rmsnorm");
    run_linear(normed_.get(), w.lm_head, w.q_lm_head, logits_.get(), true, false, s.logit_rows,
               padded_rows(s.logit_rows), c.vocab_size, H);
  }
  if (params_.logit_limit > 0 && params_.logit_limit < c.vocab_size) {
    kernels::MaskLogitsParams mp;  // ids the tokenizer cannot decode
    mp.logits = as<float>(logits_);
    mp.rows = s.logit_rows;
    mp.vocab = c.vocab_size;
    mp.from = params_.logit_limit;
    check(kernels::mask_logits(mp, stream_), "mask_logits");
  }
  if (with_argmax) {
    kernels::ArgmaxParams gp;
    gp.logits = as<float>(logits_);
    gp.out = as<int32_t>(sampled_);
    gp.rows = s.logit_rows;
    gp.vocab = c.vocab_size;
    check(kernels::argmax(gp, stream_), "argmax");
  }
}

void CudaContext::launch(const Step &s, bool with_argmax, const StepFeed *feed) {
  const int64_t fields = kFields * int64_t{params_.max_rows};  // where the tables start
  const int64_t table_end = int64_t{s.pages} + s.extra;
  grow_capture(s);
  const auto enqueue_begin = std::chrono::steady_clock::now();
  if (trace_) check(cudaEventRecord(trace_begin_, stream_), "cudaEventRecord");
  check(cudaMemcpyAsync(
            meta_dev_.get(), feed && feed->fields ? feed->fields : meta_host_.get<int32_t>(),
            kFields * int64_t{s.field_stride} * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
        "upload of staged indices");
  if (feed && feed->ids != nullptr) {
    kernels::FeedTokensParams fp;
    fp.ids = feed->ids;
    fp.from = feed->from;
    fp.tokens = meta(s, kTokens);
    fp.n = feed->n;
    check(kernels::feed_tokens(fp, stream_), "feed_tokens");
  }
  if (s.table_from < table_end)
    check(cudaMemcpyAsync(meta_dev_.get<int32_t>() + fields + s.table_from,
                          meta_host_.get<int32_t>() + fields + s.table_from,
                          (table_end - s.table_from) * sizeof(int32_t), cudaMemcpyHostToDevice,
                          stream_),
          "upload of page tables");
  tables_.uploaded();
  if (replay_upload_pending_) {
    check(cudaEventRecord(replay_uploaded_, stream_), "cudaEventRecord");
    replay_upload_pending_ = false;
  }
  if (s.graph)
    graphs_.run(
        DeviceGraphs::Key{s.n_seqs, s.n_splits, with_argmax, s.quest, s.sparse, s.rows,
                          s.max_rows_per_seq, s.decode ? 0 : s.max_keys, s.cap_slots, s.cap_stride},
        stream_, [&] { enqueue(s, with_argmax); });
  else
    enqueue(s, with_argmax);
  if (trace_) check(cudaEventRecord(trace_forward_, stream_), "cudaEventRecord");
  if (!replay_without_selection_)
    selection_->launch_step(stream_, as<kernels::f16>(cap_logits_), as<float>(cap_lse_),
                            s.cap_slots, s.cap_stride, model_.config().n_layers,
                            model_.config().n_heads);
  if (trace_) {
    check(cudaEventRecord(trace_end_, stream_), "cudaEventRecord");
    trace_enqueue_ms_ =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - enqueue_begin)
            .count();
  }
  if (pending_.empty()) return;  // no host-side capture
  const int64_t lse_n = int64_t{model_.config().n_layers} * s.cap_slots * model_.config().n_heads;
  // Pinned host copies only for host-side selection (device selection needs none).
  cap_logits_host_.reserve(lse_n * s.cap_stride * sizeof(kernels::f16), "score capture");
  cap_lse_host_.reserve(lse_n * sizeof(float), "score capture");
  check(
      cudaMemcpyAsync(cap_logits_host_.get(), cap_logits_.get(),
                      lse_n * s.cap_stride * sizeof(kernels::f16), cudaMemcpyDeviceToHost, stream_),
      "score capture download");
  check(cudaMemcpyAsync(cap_lse_host_.get(), cap_lse_.get(), lse_n * sizeof(float),
                        cudaMemcpyDeviceToHost, stream_),
        "score capture download");
}

void CudaContext::grow_capture(const Step &s) {
  if (s.cap_slots == 0) return;
  const int64_t lse_n = int64_t{model_.config().n_layers} * s.cap_slots * model_.config().n_heads;
  const int64_t need = lse_n * std::max(s.cap_stride, 1);
  if (need <= cap_capacity_ && lse_n <= cap_lse_capacity_) return;
  graphs_.clear();  // graphs of captured passes hold the old addresses
  check(cudaStreamSynchronize(stream_), "stream sync");
  if (need > cap_capacity_) {
    cap_capacity_ = std::max(need, 2 * cap_capacity_);
    cap_logits_.allocate(cap_capacity_ * sizeof(kernels::f16), "score capture");
  }
  if (lse_n > cap_lse_capacity_) {
    cap_lse_capacity_ = std::max(lse_n, 2 * cap_lse_capacity_);
    cap_lse_.allocate(cap_lse_capacity_ * sizeof(float), "score capture");
  }
}

void CudaContext::deliver_captures(const Step &s) {
  if (pending_.empty()) return;
  const ModelConfig &c = model_.config();
  const kernels::f16 *logits = cap_logits_host_.get<kernels::f16>();
  const float *lse = cap_lse_host_.get<float>();
  const int64_t heads = c.n_heads;
  for (const PendingCapture &pc : pending_) {
    const ScoreCapture &cap = *pc.cap;
    for (int32_t l = 0; l < c.n_layers; ++l)
      for (int32_t k = 0; k < cap.n_rows; ++k)
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t src = (int64_t{l} * s.cap_slots + pc.first_slot + k) * heads + h;
          const int64_t dst = (int64_t{l} * cap.n_rows + k) * heads + h;
          cap.lse[dst] = lse[src];
          const kernels::f16 *from = logits + src * s.cap_stride;
          float *to = cap.logits + dst * cap.n_candidates;
          f16_rows_to_f32(reinterpret_cast<const uint16_t *>(from), to, cap.n_candidates);
        }
  }
}

const float *CudaContext::forward(const ForwardBatch &batch) {
  model_.activate();
  const auto t0 = std::chrono::steady_clock::now();
  const Step s = stage(batch);
  const auto t1 = std::chrono::steady_clock::now();
  launch(s, false);
  const int64_t vocab = model_.config().vocab_size;
  const size_t bytes = static_cast<size_t>(s.real_logit_rows * vocab) * sizeof(float);
  logits_host_.reserve(std::max<size_t>(bytes, 4), "host logits");
  if (bytes > 0)
    check(
        cudaMemcpyAsync(logits_host_.get(), logits_.get(), bytes, cudaMemcpyDeviceToHost, stream_),
        "logits download");
  check(cudaStreamSynchronize(stream_), "forward");
  deliver_captures(s);
  trace_step(s, "logits", t0, t1);
  return logits_host_.get<float>();
}

void CudaContext::trace_step(const Step &s, const char *kind,
                             std::chrono::steady_clock::time_point t0,
                             std::chrono::steady_clock::time_point t1) {
  if (!trace_) return;
  float device_ms = 0.0f, forward_ms = 0.0f;
  check(cudaEventElapsedTime(&device_ms, trace_begin_, trace_end_), "trace");
  check(cudaEventElapsedTime(&forward_ms, trace_begin_, trace_forward_), "trace");
  const auto t2 = std::chrono::steady_clock::now();
  using ms = std::chrono::duration<double, std::milli>;
  std::fprintf(
      stderr,
      "[vegas-cuda] %s rows %d seqs %d max_rows/seq %d splits %d graph %d cap_slots %d "
      "stage %.3f ms enqueue %.3f ms device %.3f ms (forward %.3f) total %.3f ms host gap before "
      "%.3f ms\n",
      kind, s.rows, s.n_seqs, s.max_rows_per_seq, s.n_splits, s.graph ? 1 : 0, s.cap_slots,
      ms(t1 - t0).count(), trace_enqueue_ms_, device_ms, forward_ms, ms(t2 - t0).count(),
      trace_last_end_.time_since_epoch().count() == 0 ? 0.0 : ms(t0 - trace_last_end_).count());
  trace_last_end_ = t2;
}

bool CudaContext::forward_sample(const ForwardBatch &batch, const RowSampling *rows,
                                 int32_t *tokens_out) {
  const int32_t n = batch.logit_rows();
  const int32_t vocab = model_.config().vocab_size;
  if (!row_sampler_->prepare(rows, n, vocab)) return false;
  model_.activate();
  const auto t0 = std::chrono::steady_clock::now();
  const Step s = stage(batch);
  const auto t1 = std::chrono::steady_clock::now();
  // All greedy without penalties: the argmax runs inside the step (and its
  // graph). Otherwise penalties and kernels::sample run after it.
  const bool in_graph_argmax = row_sampler_->argmax_suffices();
  launch(s, in_graph_argmax);
  if (!in_graph_argmax)
    row_sampler_->enqueue(rows, n, as<float>(logits_), vocab, as<int32_t>(sampled_), stream_);
  if (n > 0)
    check(cudaMemcpyAsync(sampled_host_.get(), sampled_.get(), n * sizeof(int32_t),
                          cudaMemcpyDeviceToHost, stream_),
          "sampled ids download");
  check(cudaStreamSynchronize(stream_), "forward_sample");
  deliver_captures(s);
  trace_step(s, "sample", t0, t1);
  std::copy(sampled_host_.get<int32_t>(), sampled_host_.get<int32_t>() + n, tokens_out);
  DeviceRowSampler::check_drawn(tokens_out, n);
  return true;
}

bool CudaContext::forward_candidates(const ForwardBatch &batch, const int32_t *k,
                                     std::vector<LogitCandidates> *out) {
  if (!begin_candidates(batch, k)) return false;
  end_candidates(out);
  return true;
}

bool CudaContext::begin_candidates(const ForwardBatch &batch, const int32_t *k,
                                   const int32_t *fed) {
  static const bool enabled = kernels::variant_enabled("VEGAS_CUDA_CANDIDATES");
  if (!enabled) return false;
  // A pass begun and never ended (its caller threw in between) is abandoned.
  if (pending_cand_) {
    check(cudaStreamSynchronize(stream_), "abandoned pass");
    pending_cand_.reset();
  }
  const int32_t n = batch.logit_rows();
  for (int32_t i = 0; i < n; ++i)
    if (k[i] < 1)
      fail(VEGAS_ERR_INVALID_ARGUMENT, "forward_candidates: k of logit row " + std::to_string(i) +
                                           " is " + std::to_string(k[i]) + ", not >= 1");
  const int32_t token_rows = batch.total_rows();
  if (fed != nullptr) chain_->check_feed(fed, token_rows);
  model_.activate();
  if (pending_chain_) chain_->wait_tables_read();
  const auto t0 = std::chrono::steady_clock::now();
  const Step s = stage(batch);
  const auto t1 = std::chrono::steady_clock::now();
  if (fed != nullptr) {
    // The draft rows' tokens are the chain's draws, still on the device.
    StepFeed feed;
    feed.from = chain_->upload_feed(fed, token_rows, stream_);
    feed.ids = chain_->all_draws();
    feed.n = token_rows;
    launch(s, false, &feed);
  } else {
    launch(s, false);
  }
  const int64_t out_ints = kernels::CandidateLayout{n, kMaxCandidateTopK}.ints();
  if (n > 0) {
    std::copy(k, k + n, cand_k_host_.get<int32_t>());
    check(cudaMemcpyAsync(cand_k_.get(), cand_k_host_.get(), n * sizeof(int32_t),
                          cudaMemcpyHostToDevice, stream_),
          "upload of candidate counts");
    int32_t *dev = cand_out_.get<int32_t>();
    enqueue_candidates(n, dev);
    check(cudaMemcpyAsync(cand_out_host_.get(), dev, out_ints * sizeof(int32_t),
                          cudaMemcpyDeviceToHost, stream_),
          "logit candidates download");
  }
  pending_cand_ = PendingCandidates{s, t0, t1, std::vector<int32_t>(k, k + n)};
  return true;
}

void CudaContext::end_candidates(std::vector<LogitCandidates> *out) {
  if (!pending_cand_)
    fail(VEGAS_ERR_INTERNAL, "end_candidates without a pass begun by begin_candidates");
  const PendingCandidates pc = std::move(*pending_cand_);
  pending_cand_.reset();
  check(cudaStreamSynchronize(stream_), "forward_candidates");
  deliver_captures(pc.step);
  trace_step(pc.step, "candidates", pc.t0, pc.t1);
  const int32_t n = static_cast<int32_t>(pc.k.size());
  const kernels::CandidateLayout layout{n, kMaxCandidateTopK};
  const int32_t *host = cand_out_host_.get<int32_t>();
  const int64_t vocab = model_.config().vocab_size;
  out->resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    LogitCandidates &c = (*out)[static_cast<size_t>(i)];
    const int32_t count = host[i];
    if (count >= 0) {
      c.ids.assign(layout.ids(host, i), layout.ids(host, i) + count);
      c.logits.assign(layout.values(host, i), layout.values(host, i) + count);
      continue;
    }
    // More ties than the buffer holds, or a bad row: the host cuts the row
    // down itself (and raises build_distribution's error for a bad one).
    logits_host_.reserve(static_cast<size_t>(vocab) * sizeof(float), "host logits");
    check(cudaMemcpyAsync(logits_host_.get(), as<float>(logits_) + i * vocab,
                          static_cast<size_t>(vocab) * sizeof(float), cudaMemcpyDeviceToHost,
                          stream_),
          "logits row download");
    check(cudaStreamSynchronize(stream_), "forward_candidates");
    extract_candidates(logits_host_.get<float>(), static_cast<int32_t>(vocab),
                       pc.k[static_cast<size_t>(i)], &c);
  }
}

void CudaContext::enqueue_candidates(int32_t n, int32_t *out) {
  const kernels::CandidateLayout layout{n, kMaxCandidateTopK};
  kernels::CandidateParams cp;
  cp.logits = as<float>(logits_);
  cp.k = cand_k_.get<int32_t>();
  cp.count = out;
  cp.ids = layout.ids(out);
  cp.values = layout.values(out);
  cp.rows = n;
  cp.vocab = model_.config().vocab_size;
  cp.cap = layout.cap;
  // Never inside a capture: a growth frees the old buffer, which waits for the device.
  const size_t scratch =
      kernels::logit_candidates_scratch_ints(n, cp.vocab, cp.cap) * sizeof(int32_t);
  if (cand_scratch_.bytes() < scratch)
    cand_scratch_.allocate(std::max(scratch, 2 * cand_scratch_.bytes()), "logit candidates");
  cp.scratch = cand_scratch_.get<int32_t>();
  check(kernels::logit_candidates(cp, stream_), "logit_candidates");
}

bool CudaContext::chains_passes() const {
  static const bool enabled = kernels::variant_enabled("VEGAS_CUDA_CANDIDATES") &&
                              kernels::variant_enabled("VEGAS_CUDA_DRAFT_CHAIN");
  return enabled && model_.options().use_graphs;
}

bool CudaContext::forward_draft_chain(const ForwardBatch &first, int32_t steps,
                                      const RowSampling *rows, const int32_t *k,
                                      int32_t *tokens_out, std::vector<LogitCandidates> *cands) {
  return begin_draft_chain(first, steps, rows, k) && end_draft_chain(tokens_out, cands);
}

bool CudaContext::chain_takes(const ForwardBatch &first, const RowSampling *rows,
                              const int32_t *k) const {
  for (size_t i = 0; i < first.seqs.size(); ++i) {
    const SeqRows &r = first.seqs[i];
    const SamplingParams *p = rows[i].params;
    // A host sparse set (a draft model's window) is the same for every pass
    // of a round: each pass uploads the same records from the staging buffer.
    if (r.n_tokens != 1 || r.logits != SeqRows::Logits::kLast || r.quest || r.capture ||
        p == nullptr || p->has_penalties())
      return false;
    validate_sampling_params(*p);
    if (k[i] < 1)
      fail(VEGAS_ERR_INVALID_ARGUMENT, "forward_draft_chain: k of row " + std::to_string(i) +
                                           " is " + std::to_string(k[i]) + ", not >= 1");
  }
  return true;
}

void CudaContext::enqueue_chain_draws(int32_t j, int32_t n) {
  // Draws from each pass's candidates (sample_candidates) rather than its
  // rows (sample); VEGAS_CUDA_CHAIN_FROM_CANDIDATES=0 keeps the row sampler.
  static const bool from_candidates = kernels::variant_enabled("VEGAS_CUDA_CHAIN_FROM_CANDIDATES");
  const kernels::CandidateLayout pass_layout = chain_->pass_layout();
  int32_t *pass_cands = chain_->pass_candidates(j);
  if (from_candidates) {
    // The candidates are the rows' top-k sets: drawing from them replaces a
    // pass over every row's vocabulary.
    enqueue_candidates(n, pass_cands);
    kernels::CandidateSampleParams cs;
    cs.count = pass_cands;
    cs.ids = pass_layout.ids(pass_cands);
    cs.values = pass_layout.values(pass_cands);
    cs.cap = pass_layout.cap;
    cs.rules = chain_->rules(j);
    cs.out = chain_->draws(j);
    cs.rows = n;
    check(kernels::sample_candidates(cs, stream_), "sample_candidates");
    return;
  }
  kernels::SampleParams sp;
  sp.logits = as<float>(logits_);
  sp.rules = chain_->rules(j);
  sp.out = chain_->draws(j);
  sp.rows = n;
  sp.vocab = model_.config().vocab_size;
  check(kernels::sample(sp, stream_), "sample");
  enqueue_candidates(n, pass_cands);
}

bool CudaContext::begin_draft_chain(const ForwardBatch &first, int32_t steps,
                                    const RowSampling *rows, const int32_t *k) {
  const int32_t n = static_cast<int32_t>(first.seqs.size());
  if (!chains_passes() || steps < 1 || n == 0) return false;
  // A chain or pass begun and never ended (its caller threw in between) is abandoned.
  if (pending_chain_ || pending_cand_) {
    check(cudaStreamSynchronize(stream_), "abandoned pass");
    pending_chain_.reset();
    pending_cand_.reset();
  }
  if (!chain_takes(first, rows, k)) return false;
  model_.activate();
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t field_ints = kFields * int64_t{decode_bucket(n, params_.max_rows)};
  chain_->begin(steps, n, field_ints, rows, stream_);
  std::copy(k, k + n, cand_k_host_.get<int32_t>());
  check(cudaMemcpyAsync(cand_k_.get(), cand_k_host_.get(), n * sizeof(int32_t),
                        cudaMemcpyHostToDevice, stream_),
        "upload of candidate counts");
  ForwardBatch pass = first;
  Step s;
  for (int32_t j = 0; j < steps; ++j) {
    for (size_t i = 0; i < pass.seqs.size(); ++i) {
      pass.seqs[i].start_pos = first.seqs[i].start_pos + j;
      if (first.seqs[i].device_sparse_span > 0)
        pass.seqs[i].device_sparse_span = first.seqs[i].device_sparse_span + j;
    }
    s = stage(pass);
    if (!s.graph || !s.decode || kFields * int64_t{s.field_stride} > field_ints)
      fail(VEGAS_ERR_INTERNAL, "forward_draft_chain: a draft pass is not a decode step");
    // Each pass keeps its own pinned fields: the uploads run after later passes are staged.
    int32_t *fields = chain_->pass_fields(j);
    std::copy(meta_host_.get<int32_t>(), meta_host_.get<int32_t>() + kFields * s.field_stride,
              fields);
    StepFeed feed;
    feed.fields = fields;
    feed.ids = j > 0 ? chain_->draws(j - 1) : nullptr;
    feed.n = n;
    launch(s, false, &feed);
    // Host sparse records go up with every pass (Step::table_from): a pass
    // staged behind the chain waits for the last of them.
    if (j == 0 || s.extra > 0) chain_->mark_tables_read(stream_);
    enqueue_chain_draws(j, n);
  }
  chain_->download(stream_);
  pending_chain_ = PendingChain{s, steps, n, t0, std::chrono::steady_clock::now()};
  return true;
}

bool CudaContext::end_draft_chain(int32_t *tokens_out, std::vector<LogitCandidates> *cands) {
  if (!pending_chain_)
    fail(VEGAS_ERR_INTERNAL, "end_draft_chain without a chain begun by begin_draft_chain");
  const PendingChain pc = std::move(*pending_chain_);
  pending_chain_.reset();
  const bool whole = chain_->collect(tokens_out, cands);
  // The trace's events are a later pass's when one was begun behind the chain.
  if (!pending_cand_)
    trace_step(pc.last, "draft-chain (stage: all passes enqueued; device: the last pass)", pc.t0,
               pc.t1);
  return whole;
}

double CudaContext::replay_seconds(const ForwardBatch &batch, int n, bool selection) {
  model_.activate();
  const Step s = stage(batch);
  launch(s, true);       // captures the graph, if the step has one
  struct SelectionOff {  // for the replays only, also when one throws
    bool &flag;
    ~SelectionOff() { flag = false; }
  } off{replay_without_selection_};
  replay_without_selection_ = !selection;
  const int replays = std::max(n, 1);
  std::unique_ptr<Event[]> events(new Event[replays + 1]);
  check(cudaEventRecord(events[0].e, stream_), "cudaEventRecord");
  for (int i = 1; i <= replays; ++i) {
    launch(s, true);
    check(cudaEventRecord(events[i].e, stream_), "cudaEventRecord");
  }
  check(cudaStreamSynchronize(stream_), "replay_seconds");
  std::vector<double> t;
  for (int i = 1; i <= replays; ++i) {
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, events[i - 1].e, events[i].e), "cudaEventElapsedTime");
    t.push_back(ms * 1e-3);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void CudaContext::enqueue_replay(const ForwardBatch &batch) {
  model_.activate();
  // The staging buffer is reused: before another batch overwrites it, the
  // previous launch's upload must have run (one step of look-ahead).
  if (replay_uploaded_ == nullptr)
    check(cudaEventCreateWithFlags(&replay_uploaded_, cudaEventDisableTiming), "cudaEventCreate");
  else if (&batch != replay_last_)
    check(cudaEventSynchronize(replay_uploaded_), "enqueue_replay");
  replay_last_ = &batch;
  const Step s = stage(batch);
  replay_upload_pending_ = true;
  launch(s, true);
}

void CudaContext::synchronize() {
  check(cudaStreamSynchronize(stream_), "synchronize");
}

void CudaContext::randomize_kv(uint64_t seed) {
  model_.activate();
  kv_->randomize(seed, stream_);
  enqueue_quest_bounds(nullptr, 0);  // every page's bounds follow its new keys
  check(cudaStreamSynchronize(stream_), "randomize_kv");
}

}  // namespace vegas::cuda
