// STL allocator over mimalloc for the runtime's host-side containers
// (sequence state, token buffers, scheduler structures).
//
// DESIGN asked for "a heap per session". mimalloc heaps (mi_heap_new) may only
// allocate on the thread that created them, while our contract lets any one
// thread at a time drive a session (game engines hop job threads). A per-session
// mi_heap would therefore be undefined behaviour in legal host programs, so we
// use mimalloc's thread-safe API (mi_malloc/mi_free, thread-local heaps
// underneath) — the same allocator, without the ownership hazard, and without
// ever overriding the host program's malloc.
#pragma once

#include <cstddef>
#include <new>
#include <string>
#include <vector>

#include <mimalloc.h>

namespace vegas {

template <typename T>
struct MiAllocator {
  using value_type = T;
  MiAllocator() noexcept = default;
  template <typename U>
  MiAllocator(const MiAllocator<U> &) noexcept {}

  T *allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_alloc();
    void *p = mi_malloc_aligned(n * sizeof(T), alignof(T));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T *>(p);
  }
  void deallocate(T *p, std::size_t) noexcept { mi_free(p); }

  template <typename U>
  bool operator==(const MiAllocator<U> &) const noexcept { return true; }
  template <typename U>
  bool operator!=(const MiAllocator<U> &) const noexcept { return false; }
};

template <typename T>
using MiVector = std::vector<T, MiAllocator<T>>;
using MiString = std::basic_string<char, std::char_traits<char>, MiAllocator<char>>;

}  // namespace vegas
