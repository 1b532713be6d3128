#include "backend/cpu/cpu_context.h"
#include "backend/kv_move_slots.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "backend/cpu/cpu_backend_model.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/forward_batch_check.h"
#include "common/error.h"
#include "common/kv_fp8.h"

namespace vegas {
namespace {

void check_params(const ContextParams &p) {
  if (p.num_pages <= 0 || p.page_size <= 0 || p.max_rows <= 0) {
    fail(VEGAS_ERR_INVALID_ARGUMENT, "CPU context: num_pages " + std::to_string(p.num_pages) +
                                         ", page_size " + std::to_string(p.page_size) +
                                         " and max_rows " + std::to_string(p.max_rows) +
                                         " must all be > 0");
  }
  if (int64_t{p.num_pages} * p.page_size > std::numeric_limits<int32_t>::max()) {
    fail(VEGAS_ERR_INVALID_ARGUMENT, "CPU context: num_pages * page_size exceeds 2^31 slots");
  }
}

// Sizes `v` to n floats, turning an allocation failure into OUT_OF_MEMORY.
void allocate(std::vector<float> &v, int64_t n, const char *what) {
  try {
    v.assign(static_cast<size_t>(n), 0.f);
  } catch (const std::bad_alloc &) {
    fail(VEGAS_ERR_OUT_OF_MEMORY, std::string("CPU context: cannot allocate ") +
                                      std::to_string(n * 4) + " bytes for " + what);
  }
}

// Zero-filling a pool larger than the host's memory would get the process
// killed under overcommit instead of failing the allocation, so refuse it.
void check_fits_memory(uint64_t bytes) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_bytes <= 0) return;  // unknown: let the allocation decide
  const uint64_t physical = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_bytes);
  if (bytes > physical) {
    fail(VEGAS_ERR_OUT_OF_MEMORY, "CPU context: a KV pool of " + std::to_string(bytes) +
                                      " bytes exceeds the host's " + std::to_string(physical) +
                                      " bytes of memory");
  }
}

const float *or_null(const std::vector<float> &v) {
  return v.empty() ? nullptr : v.data();
}

}  // namespace

CpuContext::CpuContext(const CpuBackendModel &model, const ContextParams &params)
    : model_(model), params_(params) {
  check_params(params_);
  const ModelConfig &c = model_.config();
  const int64_t slots = int64_t{params_.num_pages} * params_.page_size;
  check_fits_memory(model_.kv_bytes_per_token(params_.kv_fp8) * static_cast<uint64_t>(slots));
  k_cache_.resize(static_cast<size_t>(c.n_layers));
  v_cache_.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    allocate(k_cache_[static_cast<size_t>(l)], slots * c.kv_dim(), "the K cache");
    allocate(v_cache_[static_cast<size_t>(l)], slots * c.kv_dim(), "the V cache");
  }
  const int64_t rows = params_.max_rows;
  allocate(x_, rows * c.hidden_size, "activations");
  allocate(xn_, rows * c.hidden_size, "activations");
  allocate(tmp_, rows * c.hidden_size, "activations");
  allocate(q_, rows * c.q_dim(), "activations");
  allocate(attn_, rows * c.q_dim(), "activations");
  allocate(k_, rows * c.kv_dim(), "activations");
  allocate(v_, rows * c.kv_dim(), "activations");
  allocate(gate_, rows * c.intermediate_size, "activations");
  allocate(up_, rows * c.intermediate_size, "activations");
  quest_shape_.n_layers = c.n_layers;
  quest_shape_.n_heads = c.n_heads;
  quest_shape_.n_kv_heads = c.n_kv_heads;
  quest_shape_.head_dim = c.head_dim;
  quest_shape_.page_size = params_.page_size;
  if (params_.key_bounds) key_bounds_.allocate(quest_shape_, params_.num_pages);
}

double CpuContext::take_select_seconds() {
  const double s = select_seconds_;
  select_seconds_ = 0.0;
  return s;
}

void CpuContext::prepare_rows(const ForwardBatch &batch) {
  const int64_t n = batch.total_rows();
  tokens_.resize(static_cast<size_t>(n));
  positions_.resize(static_cast<size_t>(n));
  slots_.resize(static_cast<size_t>(n));
  attention_rows_.resize(static_cast<size_t>(n));
  written_pages_.clear();
  tree_keys_.resize(static_cast<size_t>(n));
  const int32_t ps = params_.page_size;
  size_t r = 0;
  for (const SeqRows &s : batch.seqs) {
    const size_t first = r;
    for (int32_t i = 0; i < s.n_tokens; ++i, ++r) {
      const int32_t pos = s.start_pos + i;
      tokens_[r] = s.tokens[i];
      positions_[r] = pos;
      slots_[r] = int64_t{s.page_table[pos / ps]} * ps + pos % ps;
      // A sequence's rows are consecutive positions, so its pages repeat only
      // back to back; sequences own distinct pages.
      if (key_bounds_.enabled() && (i == 0 || pos % ps == 0))
        written_pages_.push_back(s.page_table[pos / ps]);
      AttentionRow &a = attention_rows_[r];
      a = AttentionRow{};
      a.page_table = s.page_table;
      a.position = pos;
      a.sparse = s.sparse;
    }
    if (s.tree != nullptr) prepare_tree_rows(s, first);
    if (s.capture != nullptr) {
      for (int32_t c = 0; c < s.capture->n_rows; ++c) {
        AttentionRow &a = attention_rows_[first + static_cast<size_t>(s.capture->rows[c])];
        a.capture = s.capture;
        a.capture_index = c;
      }
    }
  }
  quest_rows_.prepare(batch, quest_shape_);
  quest_rows_.attach(attention_rows_);
}

void CpuContext::prepare_tree_rows(const SeqRows &s, size_t first) {
  const TokenTree &t = *s.tree;
  tree_depths_.resize(static_cast<size_t>(t.n_nodes));
  tree_depths_[0] = 0;
  for (int32_t i = 1; i < t.n_nodes; ++i)
    tree_depths_[static_cast<size_t>(i)] = tree_depths_[static_cast<size_t>(t.parents[i])] + 1;
  for (int32_t i = 0; i < s.n_tokens; ++i) {
    const int32_t node = s.start_pos - t.base + i;
    const size_t r = first + static_cast<size_t>(i);
    positions_[r] = t.base + tree_depths_[static_cast<size_t>(node)];
    std::vector<int32_t> &keys = tree_keys_[r];
    keys.clear();
    for (int32_t a = node; a >= 0; a = t.parents[a]) keys.push_back(t.base + a);
    std::reverse(keys.begin(), keys.end());
    AttentionRow &a = attention_rows_[r];
    a.tree_keys = keys.data();
    a.n_tree_keys = static_cast<int32_t>(keys.size());
    a.tree_base = t.base;
  }
}

void CpuContext::move_kv(const KvMove &move) {
  const int64_t kv_dim = model_.config().kv_dim();
  const KvMoveSlots slots = resolve_kv_move(move, params_.page_size, params_.num_pages);
  written_pages_ = slots.pages;
  const int nt = model_.n_threads();
  for (int layer = 0; layer < model_.config().n_layers; ++layer) {
    for (std::vector<float> *cache :
         {&k_cache_[static_cast<size_t>(layer)], &v_cache_[static_cast<size_t>(layer)]})
      for (size_t i = 0; i < slots.from.size(); ++i)
        std::memmove(cache->data() + slots.to[i] * kv_dim, cache->data() + slots.from[i] * kv_dim,
                     sizeof(float) * static_cast<size_t>(kv_dim));
    if (key_bounds_.enabled())
      key_bounds_.update(layer, k_cache_[static_cast<size_t>(layer)].data(), written_pages_, nt);
  }
}

void CpuContext::run_layer(int layer, int64_t n) {
  const ModelConfig &c = model_.config();
  const CpuLayerWeights &w = model_.weights().layers[static_cast<size_t>(layer)];
  const int nt = model_.n_threads();
  const int64_t hidden = c.hidden_size, q_dim = c.q_dim(), kv_dim = c.kv_dim();
  const float eps = static_cast<float>(c.rms_norm_eps);

  // Attention block: x += o_proj(attention(rope(norm(q)), rope(norm(k)), v)).
  cpu_rmsnorm(x_.data(), w.attn_norm.data(), n, hidden, eps, xn_.data(), nt);
  cpu_matmul(xn_.data(), n, w.wq, or_null(w.bq), q_dim, hidden, q_.data(), nt);
  cpu_matmul(xn_.data(), n, w.wk, or_null(w.bk), kv_dim, hidden, k_.data(), nt);
  cpu_matmul(xn_.data(), n, w.wv, or_null(w.bv), kv_dim, hidden, v_.data(), nt);
  if (c.qk_norm) {
    cpu_rmsnorm(q_.data(), w.q_norm.data(), n * c.n_heads, c.head_dim, eps, q_.data(), nt);
    cpu_rmsnorm(k_.data(), w.k_norm.data(), n * c.n_kv_heads, c.head_dim, eps, k_.data(), nt);
  }
  cpu_rope(q_.data(), n, c.n_heads, c.head_dim, rope_, nt);
  cpu_rope(k_.data(), n, c.n_kv_heads, c.head_dim, rope_, nt);
  if (params_.kv_fp8)  // the values CUDA's fp8 cache holds (common/kv_fp8.h)
    for (float *kv : {k_.data(), v_.data()})
      for (int64_t h = 0; h < n * c.n_kv_heads; ++h)
        round_head_to_fp8(kv + h * c.head_dim, c.head_dim);
  // Every new row's K/V goes into its slot before any row attends, so rows of
  // one sequence see each other causally.
  float *kc = k_cache_[static_cast<size_t>(layer)].data();
  float *vc = v_cache_[static_cast<size_t>(layer)].data();
  for (int64_t r = 0; r < n; ++r) {
    const int64_t slot = slots_[static_cast<size_t>(r)];
    std::memcpy(kc + slot * kv_dim, k_.data() + r * kv_dim, sizeof(float) * kv_dim);
    std::memcpy(vc + slot * kv_dim, v_.data() + r * kv_dim, sizeof(float) * kv_dim);
  }
  if (key_bounds_.enabled()) key_bounds_.update(layer, kc, written_pages_, nt);
  if (!quest_rows_.empty()) {  // the quest rows' sets for this layer, from their queries
    const auto t0 = std::chrono::steady_clock::now();
    quest_rows_.select_layer(layer, q_.data(), kc, key_bounds_, nt);
    select_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  AttentionShape shape;
  shape.n_layers = c.n_layers;
  shape.n_heads = c.n_heads;
  shape.n_kv_heads = c.n_kv_heads;
  shape.head_dim = c.head_dim;
  shape.page_size = params_.page_size;
  shape.scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
  cpu_paged_attention(q_.data(), attention_rows_, layer, kc, vc, shape, attn_.data(),
                      attention_scratch_, nt);
  cpu_matmul(attn_.data(), n, w.wo, nullptr, hidden, q_dim, tmp_.data(), nt);
  cpu_add(x_.data(), tmp_.data(), n * hidden, nt);

  // MLP block: x += down(silu(gate(norm(x))) * up(norm(x))).
  const int64_t inter = c.intermediate_size;
  cpu_rmsnorm(x_.data(), w.mlp_norm.data(), n, hidden, eps, xn_.data(), nt);
  cpu_matmul(xn_.data(), n, w.w_gate, nullptr, inter, hidden, gate_.data(), nt);
  cpu_matmul(xn_.data(), n, w.w_up, nullptr, inter, hidden, up_.data(), nt);
  cpu_silu_mul(gate_.data(), up_.data(), n * inter, nt);
  cpu_matmul(gate_.data(), n, w.w_down, nullptr, hidden, inter, tmp_.data(), nt);
  cpu_add(x_.data(), tmp_.data(), n * hidden, nt);
}

void CpuContext::compute_logits(const ForwardBatch &batch) {
  const ModelConfig &c = model_.config();
  const int64_t hidden = c.hidden_size;
  // Gather the rows that need logits (batch order) into xn_, then norm + head.
  int64_t out = 0, row = 0;
  for (const SeqRows &s : batch.seqs) {
    for (int32_t i = 0; i < s.n_tokens; ++i, ++row) {
      const bool wanted = s.logits == SeqRows::Logits::kAll ||
                          (s.logits == SeqRows::Logits::kLast && i == s.n_tokens - 1);
      if (!wanted) continue;
      std::memcpy(xn_.data() + out * hidden, x_.data() + row * hidden, sizeof(float) * hidden);
      ++out;
    }
  }
  if (out == 0) return;
  const int nt = model_.n_threads();
  cpu_rmsnorm(xn_.data(), model_.weights().final_norm.data(), out, hidden,
              static_cast<float>(c.rms_norm_eps), xn_.data(), nt);
  const int64_t need = out * c.vocab_size;
  if (static_cast<int64_t>(logits_.size()) < need) allocate(logits_, need, "logits");
  cpu_matmul(xn_.data(), out, model_.weights().head(), nullptr, c.vocab_size, hidden,
             logits_.data(), nt);
  if (params_.logit_limit > 0 && params_.logit_limit < c.vocab_size)
    for (int64_t r = 0; r < out; ++r)
      std::fill(logits_.data() + r * c.vocab_size + params_.logit_limit,
                logits_.data() + (r + 1) * c.vocab_size, -INFINITY);
}

const float *CpuContext::forward(const ForwardBatch &batch) {
  const ModelConfig &c = model_.config();
  check_forward_batch(batch, c, params_);
  for (const SeqRows &s : batch.seqs)
    if (s.device_select != nullptr || s.device_sparse_key >= 0)
      fail(VEGAS_ERR_UNSUPPORTED, "forward batch: the CPU backend has no device selection");
  prepare_rows(batch);
  const int64_t n = static_cast<int64_t>(tokens_.size());
  cpu_embedding(model_.weights().embed, tokens_.data(), n, c.hidden_size, x_.data());
  cpu_rope_tables(model_.rope_inv_freq(), model_.rope_scaling(), positions_.data(), n, rope_);
  for (int l = 0; l < c.n_layers; ++l) run_layer(l, n);
  compute_logits(batch);
  return logits_.data();
}

}  // namespace vegas
