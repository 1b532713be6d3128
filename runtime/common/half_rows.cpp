#include "common/half_rows.h"

#include "common/bf16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace vegas {

namespace {

#if defined(__x86_64__)
// Compiled for F16C whatever the build's baseline; called only where the
// processor has it (f16_rows_use_f16c). Converts the whole eights of [0, n)
// and returns how many values that was.
__attribute__((target("avx,f16c"))) int64_t f16c_eights(const uint16_t *from, float *to,
                                                        int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(to + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(from + i))));
  return i;
}
#endif

}  // namespace

bool f16_rows_use_f16c() {
#if defined(__x86_64__)
  static const bool f16c = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return f16c;
#else
  return false;
#endif
}

void f16_rows_to_f32(const uint16_t *from, float *to, int64_t n) {
  int64_t i = 0;
#if defined(__x86_64__)
  if (f16_rows_use_f16c()) i = f16c_eights(from, to, n);
#endif
  for (; i < n; ++i) to[i] = f16_to_f32(from[i]);
}

}  // namespace vegas
