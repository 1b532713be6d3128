// The index fields a CUDA step stages for its kernels (CudaContext::stage,
// cuda_staging.cpp) and the helpers the rest of CudaContext shares with it.
#pragma once

#include <cstdint>

namespace vegas::cuda {

// Sections of the staged index buffer, each max_rows int32 long; the
// concatenated page tables follow them.
enum Field {
  kTokens,
  kPositions,
  kSlots,
  kLogitIndex,
  kSeqPageOff,
  kSeqRowStart,
  kSeqRows,
  kSeqStartPos,
  kSeqSparseOff,    // offset of the sequence's sparse record after the page tables, -1 dense
  kSeqCapCand,      // capture candidates of the sequence
  kRowCapSlot,      // capture slot of each row, -1 = not captured
  kSeqQuestPrefix,  // quest drafting: candidates [0, prefix) of the sequence, -1 = not quest
  kSeqQuestBudget,  // quest drafting: tokens the sequence keeps at most
  kWrittenPage,     // per row: the KV page it writes when first of its page, else -1
  kSeqTreeOff,      // offset of the sequence's tree masks after the page tables, -1 none
  kFields
};

// Smallest bucket >= n among powers of two, capped at max_rows: the
// sequences a decode step's graph is captured for.
int32_t decode_bucket(int32_t n, int32_t max_rows);

}  // namespace vegas::cuda
