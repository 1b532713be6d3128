// The ABI boundary: every exported function runs its body through guarded(),
// which turns exceptions into a status and the thread-local message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#include "common/abi_struct.h"
#include "common/error.h"
#include "vegas.h"

namespace vegas::api {

void set_last_error(const std::string &message);
void clear_last_error();
const char *t_last_error_cstr();

template <typename Body>
vegas_status guarded(Body &&body) noexcept {
  try {
    clear_last_error();
    body();
    return VEGAS_OK;
  } catch (const Error &e) {
    set_last_error(e.what());
    return e.status();
  } catch (const std::bad_alloc &) {
    set_last_error("out of host memory");
    return VEGAS_ERR_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    set_last_error(std::string("internal error: ") + e.what());
    return VEGAS_ERR_INTERNAL;
  } catch (...) {
    set_last_error("internal error: unknown exception");
    return VEGAS_ERR_INTERNAL;
  }
}

// Throws INVALID_ARGUMENT "<what> is NULL".
inline void require_non_null(const void *p, const char *what) {
  if (p == nullptr) fail(VEGAS_ERR_INVALID_ARGUMENT, std::string(what) + " is NULL");
}

// Copies the caller's option struct into `out` (already holding defaults)
// within the caller's struct_size (common/abi_struct.h has the contract).
template <typename T>
void read_options(const T *in, T *out, const char *what) {
  abi::read_struct(in, out, what);
}

// Writes `n` bytes/items into a caller buffer following the ABI's
// buffer-too-small convention.
template <typename T>
void write_buffer(const T *src, size_t n, T *dst, size_t capacity, size_t *needed,
                  const char *what) {
  require_non_null(needed, what);
  *needed = n;
  if (n > capacity)
    fail(VEGAS_ERR_BUFFER_TOO_SMALL, std::string(what) + ": buffer holds " +
                                         std::to_string(capacity) + ", needs " + std::to_string(n));
  if (n > 0) {
    require_non_null(dst, "output buffer");
    std::memcpy(dst, src, n * sizeof(T));
  }
}

}  // namespace vegas::api
