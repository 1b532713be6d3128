// One session's KV storage and scratch on the CPU backend, and the forward
// pass of the model over a batch of sequences.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_quest.h"

namespace vegas {

class CpuBackendModel;

class CpuContext final : public BackendContext {
 public:
  // Allocates the whole KV pool and the per-row scratch for params.max_rows
  // rows up front (OUT_OF_MEMORY on failure; INVALID_ARGUMENT for bad params).
  CpuContext(const CpuBackendModel &model, const ContextParams &params);

  const float *forward(const ForwardBatch &batch) override;
  bool token_trees() const override { return true; }
  void move_kv(const KvMove &move) override;
  // The quest selection inside draft passes (SeqRows::quest).
  double take_select_seconds() override;

  // The K or V cache of one layer: [num_pages][page_size][n_kv_heads][head_dim].
  const std::vector<float> &k_cache(int layer) const {
    return k_cache_[static_cast<size_t>(layer)];
  }
  const std::vector<float> &v_cache(int layer) const {
    return v_cache_[static_cast<size_t>(layer)];
  }
  // The per-layer sets the quest rows of the last forward pass attended to,
  // i-th quest row in batch order (tests; valid until the next forward).
  size_t quest_rows() const { return quest_rows_.size(); }
  const SparseAttention &quest_set(size_t i) const { return quest_rows_.set(i); }

 private:
  void prepare_rows(const ForwardBatch &batch);
  // A tree sequence's rows (first at attention_rows_[first]): RoPE positions
  // by depth, and each row's ancestors and itself as its listed keys.
  void prepare_tree_rows(const SeqRows &s, size_t first);
  void run_layer(int layer, int64_t n_rows);
  void compute_logits(const ForwardBatch &batch);

  const CpuBackendModel &model_;
  ContextParams params_;
  std::vector<std::vector<float>> k_cache_, v_cache_;

  // Per forward pass, one entry per row in batch order.
  std::vector<int32_t> tokens_, positions_;
  std::vector<int64_t> slots_;
  std::vector<AttentionRow> attention_rows_;
  std::vector<int32_t> written_pages_;  // KV pages the pass writes, each once
  // The tree rows' listed keys, one list per row (AttentionRow::tree_keys).
  std::vector<std::vector<int32_t>> tree_keys_;
  std::vector<int32_t> tree_depths_;
  RopeTables rope_;

  // Quest drafting (ContextParams::key_bounds).
  QuestShape quest_shape_;
  CpuKeyBounds key_bounds_;
  CpuQuestRows quest_rows_;
  double select_seconds_ = 0.0;

  // Activations, [max_rows][width] each.
  std::vector<float> x_, xn_, tmp_, q_, k_, v_, attn_, gate_, up_;
  std::vector<float> attention_scratch_;
  std::vector<float> logits_;  // [logit rows][vocab], grown on demand
};

}  // namespace vegas
