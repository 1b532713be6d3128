// VEGAS_TARGET_CLONES: compile a hot function for AVX-512, AVX2 and baseline
// x86-64 and pick one at load time (an ifunc). Under ThreadSanitizer the ifunc
// resolver is instrumented but runs during relocation, before the TSan runtime
// exists, and crashes the process: TSan builds get the baseline version only.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define VEGAS_TARGET_CLONES
#else
#define VEGAS_TARGET_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
