#include "backend/held_page_tables.h"

#include <algorithm>

namespace vegas {

void HeldPageTables::begin_step() {
  previous_.swap(on_device_);
  on_device_.clear();
  staged_.clear();
}

bool HeldPageTables::held(size_t i, int32_t offset, int64_t needed, const int32_t *table,
                          const int32_t *staged) const {
  return i < previous_.size() && previous_[i].offset == offset && previous_[i].checked >= needed &&
         std::equal(table, table + needed, staged);
}

void HeldPageTables::keep(size_t i) {
  staged_.push_back(previous_[i]);
}

void HeldPageTables::stage(int32_t offset, int64_t checked) {
  staged_.push_back({offset, checked});
}

}  // namespace vegas
