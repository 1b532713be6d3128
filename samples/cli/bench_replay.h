// `vegas bench --edit-replay N`: an IDE's editing session against one library
// session (issue: IDE completion latency). N completion requests of the same
// file, each with its last few tokens changed (what the user typed), one after
// another, with the prefix cache on and off: time to first token and total
// time per request, medians and every value.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_measure.h"
#include "vegas.h"

namespace vegas_cli {

struct ReplayArgs {
  int32_t requests = 0;  // 0: no replay
  int32_t edited = 4;    // tokens replaced at the end of the file per request
};

nlohmann::json edit_replay(vegas_model *model, const vegas_model_info &info,
                           vegas_session_options so, const std::vector<int32_t> &file,
                           const SamplingArgs &sampling, int32_t new_tokens,
                           const ReplayArgs &replay);

}  // namespace vegas_cli
