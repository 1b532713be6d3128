#include "backend/kv_move_slots.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace vegas {

KvMoveSlots resolve_kv_move(const KvMove &move, int32_t page_size, int32_t num_pages) {
  if (move.n < 0 ||
      (move.n > 0 && (move.page_table == nullptr || move.from == nullptr || move.to == nullptr)))
    fail(VEGAS_ERR_INVALID_ARGUMENT, "move_kv: NULL lists or a negative count");
  auto slot_of = [&](int32_t pos) {
    const int64_t page = pos < 0 ? -1 : pos / page_size;
    if (page < 0 || page >= move.n_pages || move.page_table[page] < 0 ||
        move.page_table[page] >= num_pages)
      fail(VEGAS_ERR_INVALID_ARGUMENT,
           "move_kv: position " + std::to_string(pos) + " outside the page table or its pool");
    return int64_t{move.page_table[page]} * page_size + pos % page_size;
  };
  KvMoveSlots out;
  for (int32_t i = 0; i < move.n; ++i) {
    out.from.push_back(slot_of(move.from[i]));
    out.to.push_back(slot_of(move.to[i]));
    out.pages.push_back(move.page_table[move.to[i] / page_size]);
  }
  std::sort(out.pages.begin(), out.pages.end());
  out.pages.erase(std::unique(out.pages.begin(), out.pages.end()), out.pages.end());
  return out;
}

}  // namespace vegas
