// Which page tables a GPU context's device already holds (CudaContext's
// staging). Per batch index, the entries [offset, offset + checked) of the
// staged tables were checked and uploaded by an earlier step, and the pinned
// staging buffer still holds them. A sequence whose needed entries are among
// them is neither checked nor copied again, and a step uploads only from its
// first changed table: decode steps mostly repeat their tables, and checking,
// copying and uploading tens of thousands of entries every step showed in the
// step's time. Emptied while a step is staged, so a step that fails half-way
// leaves none.
//
// Host bookkeeping only (no device calls), so it is tested on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vegas {

class HeldPageTables {
 public:
  // A step's staging begins: what the device holds becomes the reference,
  // and nothing counts as held until the step's upload is enqueued.
  void begin_step();
  // Whether batch index i's first `needed` entries, `table`, are held at
  // `offset`: staged there by the step before (and uploaded), checked that
  // far, and still in the staging buffer (`staged`, the buffer at offset).
  bool held(size_t i, int32_t offset, int64_t needed, const int32_t *table,
            const int32_t *staged) const;
  // Batch index i of this step: its table as held (after held() said so), or
  // freshly staged at `offset` with entries [0, checked) checked.
  void keep(size_t i);
  void stage(int32_t offset, int64_t checked);
  // The step's upload is enqueued: the device holds what it staged.
  void uploaded() { on_device_ = staged_; }
  // The staging buffers were reallocated: the device holds nothing.
  void forget() { on_device_.clear(); }

 private:
  struct Table {
    int32_t offset = 0;
    int64_t checked = 0;
  };
  std::vector<Table> on_device_, previous_, staged_;
};

}  // namespace vegas
