// Attention for batches whose sequences have one query row each (decoding and
// sparse drafting), without score capture: the bandwidth-bound case that sets
// the speed of a decode step. paged_attention() uses it by itself when a
// batch qualifies; the parameters and the split-K contract (partial results
// merged by paged_attention_merge) are paged_attention's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "paged_attention.cuh"

namespace vegas::kernels {

// Whether the batch described by `p` can run on decode_attention: at most one
// row per sequence, no capture, a head_dim and GQA group it is built for.
bool decode_attention_applies(const PagedAttentionParams &p);

// Blocks per multiprocessor that the kernel decode_attention picks for `p`
// is built to keep resident (its launch bounds): the caller's split count
// aims at one wave of them.
int32_t decode_attention_resident_blocks(const PagedAttentionParams &p);
// The same for its wide blocks (PagedAttentionParams::decode_wide).
int32_t decode_attention_wide_resident_blocks(const PagedAttentionParams &p);

// Writes `out` (n_splits == 1) or the partial results of every split; the
// caller runs paged_attention_merge when n_splits > 1.
cudaError_t decode_attention(const PagedAttentionParams &p, cudaStream_t stream);

// The tensor-core variant decode_attention() picks by itself for head_dim 64,
// GQA groups of 4 and 8 and few sequences (decode_attention_mma.cu); VEGAS_CUDA_DECODE_MMA=0 keeps
// the CUDA-core kernel (A/B timing). decode_attention_mma expects a checked batch.
bool decode_attention_mma_applies(const PagedAttentionParams &p);
cudaError_t decode_attention_mma(const PagedAttentionParams &p, cudaStream_t stream);
// Its launch bounds' blocks per multiprocessor for `p` (one for sparse steps
// on bf16 caches, which take deeper stages; choose_splits sizes their wave by it).
int32_t decode_attention_mma_resident_blocks(const PagedAttentionParams &p);
// Keys per split for the sparse sets of a step like `p` (sparse_step, n_seqs,
// heads, k_scale set): short splits where clusters merge them, else with the
// deep stages what they request in one go.
int32_t decode_attention_sparse_split_keys(const PagedAttentionParams &p);
// The most splits a step like `p` should take: a cluster's most where sparse
// sets are merged in clusters (more would lose the cluster merge).
int32_t decode_attention_mma_max_splits(const PagedAttentionParams &p);
// Sets the variant's shared-memory limit (paged_attention_init calls it).
cudaError_t decode_attention_mma_init();
// decode_attention_mma's kernel for fp8 caches (decode_attention_mma_fp8.cu),
// which decode_attention_mma launches for them. `cluster`: merge the splits
// through clusters (decode_finish_cluster).
cudaError_t decode_attention_mma_fp8(const PagedAttentionParams &p, bool cluster,
                                     cudaStream_t stream);
cudaError_t decode_attention_mma_fp8_init();

}  // namespace vegas::kernels
