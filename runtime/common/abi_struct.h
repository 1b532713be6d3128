// The struct_size contract of the public structs (vegas.h, "Structs that grow"):
// the library copies, fills and reads a caller's struct only within the size the
// caller states, whatever size this build of the library knows the struct as.
//  - init: defaults into min(size, sizeof) bytes, the caller's bytes past the
//    library's struct zeroed, struct_size = the caller's size;
//  - read (the caller's input): min(struct_size, sizeof) bytes, the rest keeps
//    its defaults; bytes past the library's struct (fields of a newer vegas.h)
//    must be zero, else UNSUPPORTED, so a newer caller never has a setting
//    silently ignored;
//  - write (the caller's output): min(struct_size, sizeof) bytes, the caller's
//    bytes past the library's struct zeroed, struct_size left as the caller's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/error.h"

namespace vegas::abi {

// The smallest struct_size the library accepts: struct_size plus one field.
constexpr size_t kMinStructSize = sizeof(uint32_t) * 2;

// The offset of the first non-zero byte of p[from, to), or `to` if none.
inline size_t first_nonzero(const void *p, size_t from, size_t to) {
  const unsigned char *bytes = static_cast<const unsigned char *>(p);
  for (size_t i = from; i < to; ++i)
    if (bytes[i] != 0) return i;
  return to;
}

// Writes `defaults` into the caller's struct of `size` bytes (see above).
// A size too small to hold struct_size writes nothing.
template <typename T>
void init_struct(const T &defaults, T *out, size_t size) {
  if (out == nullptr || size < sizeof(uint32_t)) return;
  const size_t n = size < sizeof(T) ? size : sizeof(T);
  std::memcpy(static_cast<void *>(out), &defaults, n);
  if (size > sizeof(T)) std::memset(reinterpret_cast<char *>(out) + sizeof(T), 0, size - sizeof(T));
  // A size past 4 GiB is no struct any header declares; struct_size saturates.
  out->struct_size = size > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(size);
}

// Throws STRUCT_SIZE when `size` cannot be a real struct_size.
inline void check_struct_size(uint32_t size, const char *what) {
  if (size < kMinStructSize)
    fail(VEGAS_ERR_STRUCT_SIZE, std::string(what) + ".struct_size " + std::to_string(size) +
                                    " is too small (set it with the *_init function or to "
                                    "sizeof the struct)");
}

// Throws UNSUPPORTED when the caller's struct (struct_size `size`) sets a byte
// past the `known` bytes this library knows of.
inline void require_unknown_tail_zero(const void *in, size_t known, uint32_t size,
                                      const char *what) {
  if (size <= known) return;
  const size_t at = first_nonzero(in, known, size);
  if (at < size)
    fail(VEGAS_ERR_UNSUPPORTED, std::string(what) + " sets byte " + std::to_string(at) +
                                    ", past the " + std::to_string(known) +
                                    " bytes this libvegas knows (a field of a newer vegas.h); "
                                    "leave it zero or use a newer libvegas");
}

// Copies the caller's input struct into `out` (already holding defaults). NULL
// keeps the defaults; out->struct_size becomes sizeof(T).
template <typename T>
void read_struct(const T *in, T *out, const char *what) {
  if (in == nullptr) return;
  const uint32_t size = in->struct_size;
  check_struct_size(size, what);
  require_unknown_tail_zero(in, sizeof(T), size, what);
  const size_t n = size < sizeof(T) ? size : sizeof(T);
  std::memcpy(static_cast<void *>(out), in, n);
  out->struct_size = static_cast<uint32_t>(sizeof(T));
}

// Copies `full` (the library's complete answer) into the caller's output
// struct, within the caller's struct_size.
template <typename T>
void write_struct(const T &full, T *out, const char *what) {
  if (out == nullptr) fail(VEGAS_ERR_INVALID_ARGUMENT, std::string(what) + " is NULL");
  const uint32_t size = out->struct_size;
  check_struct_size(size, what);
  const size_t n = size < sizeof(T) ? size : sizeof(T);
  std::memcpy(static_cast<void *>(out), &full, n);
  if (size > sizeof(T)) std::memset(reinterpret_cast<char *>(out) + sizeof(T), 0, size - sizeof(T));
  out->struct_size = size;
}

}  // namespace vegas::abi
