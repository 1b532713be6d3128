// Tensor-core attention for sequences with many query rows (prefill, chunked
// prefill over an existing prefix), flash-attention-2 style.
//
// It shares PagedAttentionParams with the paged kernel and takes the dense
// sequences with at least `prefill_min_rows` rows (see defers_to_prefill in
// paged_attention.cuh); the paged kernel, run first with the same parameters,
// skips exactly those and keeps decoding, verification, sparse drafting and
// short chunks. Rows of sequence s sit at positions seq_start_pos[s] + r and
// attend causally to KV positions [0, seq_start_pos[s] + r], whose K/V are
// already in the paged cache.
//
// A block takes 128 query vectors (256 at head_dim 128) of one (sequence, KV
// head): the (row, head) pairs of the GQA group, row-major, so the heads of a
// group share each K/V tile. Eight warps of 16 vectors each (two 16-vector M
// tiles at head_dim 128, sharing every K/V fragment) compute S = QK^T and O += PV with
// mma.sync m16n8k16 (bf16 in, f32 accumulation), keep the online softmax in
// registers and mask only the tiles on the causal diagonal. K/V tiles of 64
// positions are gathered through the page table with cp.async, two tiles in
// flight while one is computed (one block barrier per tile).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "paged_attention.cuh"

namespace vegas::kernels {

// The row count from which a dense sequence is worth the tensor-core kernel.
constexpr int32_t kPrefillMinRows = 64;

// Sets kernel attributes (shared memory above 48 KB); call once per device
// before the first launch and outside stream capture.
cudaError_t prefill_attention_init();

// Whether head_dim and the GQA group size are supported (head_dim 64 or 128).
bool prefill_attention_supports(int32_t head_dim, int32_t group_size);

// Attends the rows of the sequences defers_to_prefill selects (p.prefill_min_rows
// must be > 0); other rows of p.out are left untouched. No splits, no score
// capture (p.cap_logits must be null); p.n_splits and the workspace are ignored.
cudaError_t prefill_attention(const PagedAttentionParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
