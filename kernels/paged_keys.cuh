// The key positions one sequence attends to in one layer of the paged KV
// cache: dense (0 .. its own position) or a sparse draft record (the selected
// positions below `prefix`, then every position from `prefix` on). Shared by
// paged_attention.cu and decode_attention.cu.
#pragma once

#include "paged_attention.cuh"

namespace vegas::kernels {

#if defined(__CUDACC__)

// The keys of one sequence in one layer: key j is position
// j < n_sel ? sel[j] : prefix + (j - n_sel). Dense sequences: n_sel = prefix = 0.
struct KeyMap {
  const int32_t *sel = nullptr;
  int n_sel = 0;
  int prefix = 0;
  __device__ __forceinline__ int pos(int j) const {
    return j < n_sel ? sel[j] : prefix + j - n_sel;
  }
};

__device__ __forceinline__ KeyMap key_map(const PagedAttentionParams &p, int seq) {
  KeyMap m;
  const int off = p.seq_sparse_off == nullptr ? -1 : p.seq_sparse_off[seq];
  if (off >= 0 || off <= -2) {
    const int32_t *rec = off >= 0 ? p.sparse_data + off : p.sparse_device + (-2 - off);
    m.prefix = rec[0];
    m.n_sel = rec[2 + p.layer];
    m.sel = rec + 2 + p.n_layers + static_cast<int64_t>(p.layer) * rec[1];
  }
  return m;
}

#endif  // __CUDACC__

}  // namespace vegas::kernels
