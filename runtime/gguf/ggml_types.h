// The tensor types of llama.cpp's GGML that a GGUF file may hold: their block
// geometry (every type stores its elements in blocks of block_elems values
// taking block_bytes bytes) and, for the ones libvegas reads, dequantization.
// Written from the GGUF/GGML format description; the tests check it against
// the `gguf` Python package's dequantization of random blocks.
#pragma once

#include <cstdint>

namespace vegas::gguf {

// GGML type ids as stored in a GGUF tensor directory.
enum GgmlType : uint32_t {
  kGgmlF32 = 0,
  kGgmlF16 = 1,
  kGgmlQ4_0 = 2,
  kGgmlQ4_1 = 3,
  kGgmlQ5_0 = 6,
  kGgmlQ5_1 = 7,
  kGgmlQ8_0 = 8,
  kGgmlQ8_1 = 9,
  kGgmlQ2_K = 10,
  kGgmlQ3_K = 11,
  kGgmlQ4_K = 12,
  kGgmlQ5_K = 13,
  kGgmlQ6_K = 14,
  kGgmlQ8_K = 15,
  kGgmlBF16 = 30,
};

struct GgmlTypeInfo {
  const char *name;     // "Q4_K"
  int32_t block_elems;  // values per block (1 for F32/F16/BF16)
  int32_t block_bytes;  // bytes per block
  bool dequantizable;   // dequantize() reads it
};

// The geometry of a type id, nullptr for an id this table does not know.
// Known but not dequantizable: the other types llama.cpp writes (IQ*, TQ*,
// Q2_K, Q3_K, ...), so that a file holding them parses and the error names
// the tensor and its type.
const GgmlTypeInfo *ggml_type_info(uint32_t type);

// Dequantizes `n` values (a multiple of the type's block_elems) of a
// dequantizable type from `data` into `out`. F16 and BF16 convert exactly;
// the quantized types compute as llama.cpp's reference dequantization does
// (float arithmetic on the fp16 scales).
void dequantize(uint32_t type, const void *data, int64_t n, float *out);

}  // namespace vegas::gguf
