// A token tree's ancestor masks as the attention kernels read them
// (PagedAttentionParams::seq_tree_off): record {base, words, masks[rows][words]}.
#pragma once

#include <cstdint>

namespace vegas::kernels {

#if defined(__CUDACC__)
// Whether row `row` of the tree sequence whose record is `rec` sees the key
// of tree node `node` (key base + node): bit `node` of the row's mask.
__device__ __forceinline__ bool tree_row_sees(const int32_t *rec, int row, int node) {
  const uint32_t bits = static_cast<uint32_t>(rec[2 + row * rec[1] + (node >> 5)]);
  return (bits >> (node & 31)) & 1u;
}
#endif

}  // namespace vegas::kernels
