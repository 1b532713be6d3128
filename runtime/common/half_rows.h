// float16 rows to float on the host, in bulk: what a score capture downloaded
// as halves becomes for a host-side selection (CudaContext::deliver_captures).
#pragma once

#include <cstdint>

namespace vegas {

// to[i] = f16_to_f32(from[i]) for i < n (bf16.h's conversion, exact). Where
// the processor has F16C, eight at a time with vcvtph2ps (a signalling NaN
// comes out quiet there); else one at a time.
void f16_rows_to_f32(const uint16_t *from, float *to, int64_t n);

// Whether f16_rows_to_f32 takes the F16C path on this processor.
bool f16_rows_use_f16c();

}  // namespace vegas
