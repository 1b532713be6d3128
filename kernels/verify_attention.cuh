// Tensor-core attention for verification rows: dense sequences of 2 ..
// verify_max_rows rows (speculative verification, 1 + γ rows at the end of a
// long context), with optional score capture and split-K.
//
// It shares PagedAttentionParams with the paged kernel and runs before it: the
// paged kernel skips the sequences defers_to_verify selects (paged_attention.cuh)
// and, with n_splits > 1, its merge combines the partial results this kernel
// wrote for them (and writes their captured rows' log-sum-exp), so the split
// workspace layout and log2 domain are the paged kernel's. With n_splits == 1
// this kernel writes out and cap_lse itself.
//
// A block takes 16, 32 or 64 query vectors of one (sequence, KV head): the
// (row, head in group) pairs, row-major, so a GQA group shares each K/V tile
// (7 rows x 4 heads = 28 vectors fill two 16-row mma tiles). Its four warps
// split each 64-key K/V tile between the M tiles: with one M tile every warp
// takes 16 keys, with two 32, with four 64; each warp keeps its own online
// softmax and the key slices are combined at the end. K/V tiles are gathered
// through the page table with cp.async, double-buffered.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "paged_attention.cuh"

namespace vegas::kernels {

// The most rows of a sequence this kernel takes (CudaContext's verify_max_rows).
constexpr int32_t kVerifyMaxRows = 64;

// Sets kernel attributes (shared memory above 48 KB); call once per device
// before the first launch and outside stream capture.
cudaError_t verify_attention_init();

// Whether head_dim and the GQA group size are supported (head_dim 64 or 128).
bool verify_attention_supports(int32_t head_dim, int32_t group_size);

// Attends the rows of the sequences defers_to_verify selects (p.verify_max_rows
// must be in 2 .. kVerifyMaxRows): with n_splits == 1 into p.out (and cap_lse),
// else into the split workspace for paged_attention's merge, which must follow
// unless verify_attention_merges_splits(p). Other rows are left untouched.
// Runs verify_attention_warps where it applies, else the tiled kernel.
cudaError_t verify_attention(const PagedAttentionParams &p, cudaStream_t stream);

// Whether p is a valid verify_attention call (each entry point checks).
bool verify_attention_params_valid(const PagedAttentionParams &p);

// The two kernels behind verify_attention, for tests and timing:
//  - tiled (verify_attention.cu): blocks of 16, 32 or 64 query vectors whose
//    four warps share block-wide 64-key K/V tiles; any supported shape.
//  - warps (verify_attention_warps.cu, verify_attention_warps_fp8.cu for fp8
//    caches): eight warps per block, each streaming its own keys; head_dim 64
//    and at most 32 query vectors per sequence and KV head
//    (verify_attention_warps_applies; VEGAS_CUDA_VERIFY_WARPS=0 turns it off).
//    The same ranges, results and contract, and with split_counters
//    ([n_seqs * n_kv_heads] zeros, left zero) it merges its own splits.
cudaError_t verify_attention_tiled(const PagedAttentionParams &p, cudaStream_t stream);
bool verify_attention_warps_applies(const PagedAttentionParams &p);
cudaError_t verify_attention_warps(const PagedAttentionParams &p, cudaStream_t stream);
cudaError_t verify_attention_warps_init();
// Keys per split below which the warps kernel's blocks are mostly start-up.
constexpr int32_t kVerifyWarpsMinKeysPerSplit = 512;

// Whether verify_attention merges its own splits (then the split workspace
// still holds the partial results, and a merge after it is redundant).
bool verify_attention_merges_splits(const PagedAttentionParams &p);

// Blocks of the kernel verify_attention runs for p that fit on a
// multiprocessor at once (CudaContext sizes its splits to one wave).
constexpr int32_t kVerifyTiledResidentBlocks = 4;
int32_t verify_attention_resident_blocks(const PagedAttentionParams &p);

}  // namespace vegas::kernels
