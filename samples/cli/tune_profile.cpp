#include "tune_profile.h"

namespace vegas_cli {

std::vector<Range> ranges_from_edges(const std::vector<int64_t> &edges, bool inclusive) {
  std::vector<Range> out;
  int64_t start = inclusive ? 1 : 0;
  for (int64_t e : edges) {
    out.push_back({start, e});
    start = inclusive ? e + 1 : e;
  }
  out.push_back({start, -1});
  return out;
}

size_t range_of(const std::vector<Range> &ranges, int64_t value, bool inclusive) {
  for (size_t i = 0; i < ranges.size(); ++i) {
    const Range &r = ranges[i];
    const bool below_max = r.max < 0 || (inclusive ? value <= r.max : value < r.max);
    if (value >= r.min && below_max) return i;
  }
  return value < ranges.front().min ? 0 : ranges.size() - 1;
}

int64_t representative(const Range &r) {
  return r.max < 0 ? r.min + r.min / 2 : (r.min + r.max) / 2;
}

nlohmann::json profile_json(const ProfileInfo &info, const std::vector<TunedBucket> &buckets) {
  nlohmann::json list = nlohmann::json::array();
  for (const TunedBucket &b : buckets) {
    const TunePoint &c = b.choice;
    const double speedup = b.speedup_of(c);
    list.push_back({{"context_min", b.context.min},
                    {"context_max", b.context.max},
                    {"batch_min", b.batch.min},
                    {"batch_max", b.batch.max},
                    {"policy", c.spec.policy},
                    {"window_share", tidy(c.spec.window_share)},
                    {"gamma", c.spec.gamma},
                    {"ratio", tidy(c.spec.ratio)},
                    {"tau", c.tau},
                    {"tokens_per_s", c.tokens_per_s},
                    {"speedup", speedup},
                    // Vanilla is a candidate too: where it beat every setting, auto mode
                    // starts the bucket with vanilla steps (session/mode_chooser.h).
                    {"mode", speedup > 0.0 && speedup < 1.0 ? "vanilla" : "vegas"}});
    // Where a session that drafts with the draft model starts γ.
    if (b.draft_model)
      list.back()["draft_model"] = {{"gamma", b.draft_model->spec.gamma},
                                    {"tau", b.draft_model->tau},
                                    {"tokens_per_s", b.draft_model->tokens_per_s},
                                    {"speedup", b.speedup_of(*b.draft_model)}};
  }
  return {{"format", "vegas-profile/1"}, {"model", info.model},           {"backend", info.backend},
          {"device", info.device},       {"created_by", info.created_by}, {"buckets", list}};
}

}  // namespace vegas_cli
