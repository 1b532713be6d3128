// A model loaded through the C ABI on the CPU backend, the way the ABI tests
// load the embedded model (test_abi_threads, test_abi_argument_errors,
// test_auto_tuning, test_speculative_stats).
#pragma once

#include <cstdint>
#include <string>

#include "vegas.h"

namespace vegas::test {

// n_threads 0 = the library's default (all cores).
inline vegas_status load_cpu_model(const std::string &dir, vegas_model **out,
                                   int32_t n_threads = 0) {
  vegas_model_options mo;
  vegas_model_options_init(&mo);
  mo.backend = VEGAS_BACKEND_CPU;
  mo.n_threads = n_threads;
  return vegas_model_load(dir.c_str(), &mo, out);
}

}  // namespace vegas::test
