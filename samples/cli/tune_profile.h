// Buckets and the profile file of `vegas tune` (format "vegas-profile/1", read
// by runtime/speculative/tuning_profile.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tune_search.h"

namespace vegas_cli {

// A range of contexts (prompt + generated tokens), [min, max), or of batch
// sizes, [min, max]; max -1 = unbounded.
struct Range {
  int64_t min = 0;
  int64_t max = -1;
};

// The ranges that `edges` (ascending, positive) cut [first, inf) into. Contexts
// (inclusive = false): edges 4096, 8192 give [0,4096) [4096,8192) [8192,-1).
// Batches (inclusive = true): edges 4, 16 give [1,4] [5,16] [17,-1].
std::vector<Range> ranges_from_edges(const std::vector<int64_t> &edges, bool inclusive);
// The index of the range holding `value`.
size_t range_of(const std::vector<Range> &ranges, int64_t value, bool inclusive);
// A range's representative value: its middle, 1.5 x the start of an unbounded one.
int64_t representative(const Range &r);

// One tuned bucket: its ranges, the vanilla baseline, the chosen point of the
// model's own drafting and, with --draft-model, the draft model's best point.
struct TunedBucket {
  Range context;
  Range batch;
  double vanilla_tokens_per_s = 0.0;
  TunePoint choice;
  std::optional<TunePoint> draft_model;

  // A point's tokens/s over vanilla's here; 0 when vanilla is unknown.
  double speedup_of(const TunePoint &p) const {
    return vanilla_tokens_per_s > 0 ? p.tokens_per_s / vanilla_tokens_per_s : 0.0;
  }
};

struct ProfileInfo {
  std::string model;
  std::string backend;  // "cpu" or "cuda"
  std::string device;
  std::string created_by;
};

nlohmann::json profile_json(const ProfileInfo &info, const std::vector<TunedBucket> &buckets);

}  // namespace vegas_cli
