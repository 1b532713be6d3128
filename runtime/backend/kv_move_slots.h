// A KvMove (BackendContext::move_kv) resolved to cache slots, checked the
// same way by every backend: each listed position inside the move's page
// table, each table entry inside the pool.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace vegas {

struct KvMoveSlots {
  std::vector<int64_t> from, to;  // slots, in the move's order
  std::vector<int32_t> pages;     // the pages written, each once, ascending
};

// Throws INVALID_ARGUMENT for NULL lists, a negative count, a position
// outside the table or an entry outside [0, num_pages).
KvMoveSlots resolve_kv_move(const KvMove &move, int32_t page_size, int32_t num_pages);

}  // namespace vegas
