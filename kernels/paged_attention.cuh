// Attention over the paged KV cache for every kind of batch: decoding (one row
// per sequence), verification (1+γ rows with causal masking among them),
// chunked prefill over an existing prefix, and mixes of these.
//
// Query rows of sequence s sit at positions start_pos[s] + r (r < n_rows[s])
// and attend to KV positions [0, start_pos[s] + r]; their own K/V must already
// be in the cache (rope_kv writes them first). Work is split three ways:
// (sequence, KV head) × query-row tile × KV split. The query heads of one GQA
// group and several rows share each K/V tile loaded into shared memory. Long
// contexts are cut into `n_splits` ranges whose partial results (normalised
// output + log-sum-exp) are merged by a second kernel, so short batches still
// fill the GPU. Each block derives its range from the device-side metadata, so
// one launch configuration (and one captured CUDA graph) serves any length.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_utils.cuh"

namespace vegas::kernels {

struct PagedAttentionParams {
  const bf16 *q = nullptr;        // [rows][n_heads][head_dim]
  bf16 *out = nullptr;            // [rows][n_heads][head_dim]
  const bf16 *k_cache = nullptr;  // [num_slots][n_kv_heads][head_dim] (one layer)
  const bf16 *v_cache = nullptr;
  // fp8 caches (kv_fp8.cuh), null = bf16: k_cache / v_cache then hold e4m3
  // bytes at the same element offsets, and these the scale of each (slot,
  // KV head), [num_slots][n_kv_heads] (one layer).
  const float *k_scale = nullptr;
  const float *v_scale = nullptr;
  const int32_t *page_table = nullptr;     // all sequences' tables, concatenated
  const int32_t *seq_page_off = nullptr;   // [n_seqs] first entry of s in page_table
  const int32_t *seq_row_start = nullptr;  // [n_seqs] first query row of s
  const int32_t *seq_n_rows = nullptr;     // [n_seqs] 0 = padding (skipped)
  const int32_t *seq_start_pos = nullptr;  // [n_seqs] KV tokens before the rows
  int32_t n_seqs = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;  // a multiple of 8 up to 256: paged_attention_supports
  int32_t page_size = 0;
  float scale = 0.0f;            // softmax scale, usually 1/sqrt(head_dim)
  int32_t max_rows_per_seq = 0;  // bounds the row-tile grid dimension
  int32_t n_splits = 1;          // KV ranges per (sequence, head, row tile), at most 64
  // Workspace for n_splits > 1: [n_splits][rows][n_heads][head_dim] and
  // [n_splits][rows][n_heads]; total_rows = rows of the batch.
  float *partial_out = nullptr;
  float *partial_lse = nullptr;
  int32_t total_rows = 0;
  // Optional, [n_seqs * n_kv_heads] zeros: one-row batches (decode_attention)
  // then merge their splits in the kernel (the last block of each sequence and
  // KV head to finish, counted here and reset), and paged_attention runs no
  // merge kernel after them.
  int32_t *split_counters = nullptr;
  // decode_attention: 1 when the indices above, the sparse records and every
  // cached key below a row's own position were written before the previous
  // kernel of the stream began (not so when quest_select writes records in the
  // step): the kernel reads them, and starts its K/V loads, before waiting on
  // that kernel (programmatic dependent launch).
  int32_t read_ahead = 0;
  // decode_attention: 1 when every sequence attends to a selected set (sparse
  // drafting): few keys each, where the tensor-core kernel stays ahead of the
  // CUDA-core one at more sequences (decode_attention_mma_applies).
  int32_t sparse_step = 0;

  // Sparse drafting (optional): seq_sparse_off[s] = -1 for a dense sequence,
  // else the offset in sparse_data of its record {prefix, stride,
  // counts[n_layers], positions[n_layers][stride]}. In layer `layer` its rows
  // attend to the counts[layer] selected positions (ascending, < prefix), then
  // to every position from prefix to their own.
  // An offset <= -2 names a record at sparse_device + (-2 - offset) instead
  // (sets kv_select wrote on the device).
  const int32_t *sparse_data = nullptr;
  const int32_t *sparse_device = nullptr;
  const int32_t *seq_sparse_off = nullptr;  // [n_seqs]; null = all dense
  int32_t n_layers = 0;
  int32_t layer = 0;

  // Score capture (optional, cap_logits null = none): rows with
  // row_cap_slot[row] >= 0 (full-attention rows) write scale*q.k for positions
  // [0, seq_cap_cand[s]) to cap_logits[slot][head][0 .. cap_stride) and their
  // natural-log log-sum-exp over all keys to cap_lse[slot][head] (this layer's slices).
  // The scores are stored in fp16 (round to nearest): a verification of
  // gamma + 1 rows writes them for every row, every head and the whole
  // context, more bytes than it reads of the KV cache at 22m's shapes, and
  // selection only ranks them (kv_select.cuh).
  f16 *cap_logits = nullptr;
  float *cap_lse = nullptr;
  const int32_t *row_cap_slot = nullptr;  // [total_rows]
  const int32_t *seq_cap_cand = nullptr;  // [n_seqs]
  int32_t cap_stride = 0;

  // > 0: dense sequences with at least this many rows and no capture
  // (seq_cap_cand 0) are left to prefill_attention (prefill_attention.cuh),
  // which runs after this kernel; with n_splits > 1 the merge writes zeros to
  // their rows.
  int32_t prefill_min_rows = 0;

  // > 0: dense sequences of 2 .. verify_max_rows rows (not prefill_attention's)
  // are left to verify_attention (verify_attention.cuh), which runs before
  // this kernel and writes their output, or with n_splits > 1 their partial
  // results, which this kernel's merge combines with the others.
  int32_t verify_max_rows = 0;

  // The most keys a sequence attends to (0 = few): a launch hint, by which
  // the fp8 verify kernel picks its step (verify_attention_warps_fp8.cu).
  int32_t max_keys = 0;

  // decode_attention's CUDA-core kernel: 1 for its wide blocks (sixteen warps
  // up to four query heads a group, eight for five to seven, groups of eight
  // keep four; decode_attention_wide_resident_blocks), 0 for four warps. A launch hint the runtime
  // sets for steps of few (sequence, KV head) pairs, whose four-warp blocks either took many short
  // splits (a long merge) or left a multiprocessor one block, one warp a scheduler waiting on every
  // dependent instruction of its keys.
  int32_t decode_wide = 0;

  // Token trees (optional, seq_tree_off null = none in the step): seq_tree_off[s]
  // = -1 for a sequence of consecutive rows, else the offset in tree_data of
  // its record {base, words, masks[n_rows][words]}: its row r attends to the
  // keys below base (or its sparse set's) and to key base + j only where bit j
  // of its mask is set (its ancestors and itself; runtime TokenTree). The
  // paged kernel and the tiled verify kernel read the masks: with seq_tree_off
  // set, the decode kernels and the verify warps kernel do not run, the
  // prefill kernel leaves every tree sequence to the paged one, and the verify
  // kernel takes whole trees (base = start_pos, dense: a verification pass).
  const int32_t *seq_tree_off = nullptr;
  const int32_t *tree_data = nullptr;
};

#if defined(__CUDACC__)
// Whether sequence `seq` (with n_rows rows) is prefill_attention's, not the paged kernel's.
__device__ __forceinline__ bool defers_to_prefill(const PagedAttentionParams &p, int seq,
                                                  int n_rows) {
  return p.prefill_min_rows > 0 && n_rows >= p.prefill_min_rows &&
         (p.seq_sparse_off == nullptr || p.seq_sparse_off[seq] == -1) &&
         (p.seq_tree_off == nullptr || p.seq_tree_off[seq] == -1) &&
         (p.seq_cap_cand == nullptr || p.seq_cap_cand[seq] == 0);
}

// Whether sequence `seq` (with n_rows rows) is verify_attention's, not the paged kernel's.
// A one-row dense sequence is too, whenever the verify kernel runs (verify_max_rows >= 2):
// the paged kernel gives each (sequence, KV head, split) one block that walks its keys
// 64 at a time, which for one row of a long context took longer than all the verified
// rows together (a gamma-0 sequence in a round's verification).
__device__ __forceinline__ bool defers_to_verify(const PagedAttentionParams &p, int seq,
                                                 int n_rows) {
  return n_rows >= 1 && n_rows <= p.verify_max_rows && !defers_to_prefill(p, seq, n_rows) &&
         (p.seq_sparse_off == nullptr || p.seq_sparse_off[seq] == -1) &&
         (p.seq_tree_off == nullptr || p.seq_tree_off[seq] == -1 ||
          p.tree_data[p.seq_tree_off[seq]] == p.seq_start_pos[seq]);
}
#endif

// Sets kernel attributes (shared memory above 48 KB); call once per device
// before the first launch and outside stream capture.
cudaError_t paged_attention_init();

// Whether head_dim and the GQA group size (n_heads / n_kv_heads) are supported.
bool paged_attention_supports(int32_t head_dim, int32_t group_size);

cudaError_t paged_attention(const PagedAttentionParams &p, cudaStream_t stream);

// Only the split merge paged_attention runs after its kernel when n_splits > 1
// (every row of the batch): for a batch whose sequences all went to
// verify_attention, which leaves its partial results to this merge.
cudaError_t paged_attention_merge(const PagedAttentionParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
