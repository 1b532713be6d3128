// The fp8 KV cache's values on the host (ContextParams::kv_fp8; the device
// side is kernels/kv_fp8.cuh): a head's head_dim values become e4m3 numbers
// times the power-of-two scale that brings their largest magnitude to <= 448.
// The CPU backend keeps its f32 cache and rounds each written head to these
// values, so it computes what the CUDA kernels compute from their fp8 bytes.
#pragma once

#include <cstdint>

namespace vegas {

constexpr float kFp8E4m3Max = 448.0f;
constexpr int kFp8MaxExponent = 100;  // scales within 2^+-100 (as on the device)

// The exponent e of the scale 2^e for a head whose largest magnitude is amax:
// the smallest e with amax <= 448 * 2^e, within +-100; 0 when amax is 0 or not finite.
int fp8_scale_exponent(float amax);

// x rounded to the nearest e4m3 number (ties to even), saturated to +-448;
// NaN stays NaN. Matches the device's __nv_cvt_float_to_fp8(x, SATFINITE, E4M3).
float round_to_e4m3(float x);

// The e4m3 code of x, which must be an e4m3 number (round_to_e4m3's result),
// and back.
uint8_t encode_e4m3(float x);
float decode_e4m3(uint8_t code);

// Rounds n values (one head) in place to the fp8 cache's values: each is
// round_to_e4m3(x / 2^e) * 2^e with e = fp8_scale_exponent(max |x|).
void round_head_to_fp8(float *x, int64_t n);

}  // namespace vegas
