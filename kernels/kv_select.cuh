// KV selection on the device (DESIGN §5): from the scores verification
// captured, choose each (layer, sequence)'s draft set without a host round
// trip, and write it where sparse drafting reads it.
//
// One block per (sequence, layer) scores its candidates into shared memory,
// ranks them and writes the set; past 48K candidates a scoring kernel first
// spreads the captured scores over many blocks, into global scratch. The n
// candidates [0, n) split into a head [0, head) and a tail [n - tail, n),
// always kept, and a middle whose best `scored` candidates are kept. A
// candidate's score is the mean over the listed captured rows and every query
// head of exp(logit - lse) (softmax weight) or of the logit. Ranking is
// top_k_select.h's: higher score first, equal scores prefer the later
// position, NaN ranks as -inf. The chosen positions (ascending) are written
// as the sparse record paged_attention reads:
// {prefix = n, stride, counts[n_layers], positions[n_layers][stride]}.
//
// The k-th best score is found by a 4-pass radix select over order-preserving
// 32-bit keys (in shared memory, or past 48K candidates in `keys`, scratch of
// max_candidates uint32 per (sequence, layer)), then one ordered compaction
// writes the set. Everything is in fixed device buffers; nothing is read back
// by the host.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_utils.cuh"

namespace vegas::kernels {

// One sequence's selection request (device memory, `n_seqs` of them).
struct KvSelectDesc {
  int32_t n = 0;           // candidates [0, n)
  int32_t head = 0;        // always kept: [0, head)
  int32_t tail = 0;        // always kept: [n - tail, n)
  int32_t scored = 0;      // best `scored` of [head, n - tail); head + tail + scored <= n
  int32_t first_slot = 0;  // capture slot of the first reduced row
  int32_t n_rows = 0;      // rows reduced: slots first_slot .. first_slot + n_rows - 1
  int32_t record_off = 0;  // where the record goes in `records`
  int32_t stride = 0;      // the record's positions stride (>= n)
  int32_t weight = 1;      // 1: softmax weights, 0: raw logits
};

struct KvSelectParams {
  const KvSelectDesc *desc = nullptr;  // [n_seqs]
  int32_t n_seqs = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  // Captured scores, as paged_attention writes them: cap_logits
  // [n_layers][cap_slots][n_heads][cap_stride] and cap_lse [n_layers][cap_slots][n_heads].
  const f16 *cap_logits = nullptr;  // fp16, see PagedAttentionParams::cap_logits
  const float *cap_lse = nullptr;
  int32_t cap_slots = 0;
  int32_t cap_stride = 0;
  uint32_t *keys = nullptr;    // [n_seqs][n_layers][key_stride]
  int32_t key_stride = 0;      // >= every desc.n
  int32_t *records = nullptr;  // sparse records, see above
};

// kv_select_init() once per device first: a selection block keeps up to
// 192 KB of keys in shared memory.
cudaError_t kv_select(const KvSelectParams &p, cudaStream_t stream);
cudaError_t kv_select_init();

}  // namespace vegas::kernels
