#include "speculative/tuning_profile.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/json_depth.h"
#include "common/small_file.h"
#include "speculative/prompt_lookup.h"

namespace vegas {

namespace {

using json = nlohmann::json;

constexpr const char *kFormat = "vegas-profile/1";
// Policies a profile may name: the built-in ones ("user" needs a C vtable and
// "auto" would be circular).
constexpr const char *kPolicies[] = {"vegas", "vegas-all", "specextend", "streaming",
                                     "quest", "topp",      "full",       "lookup"};
// A context or batch bound past this is a corrupt file, not a real bucket.
constexpr int64_t kMaxBound = int64_t{1} << 40;
constexpr int64_t kMaxGamma = 32;  // SpeculativeDecoder's limit (VEGAS_MAX_GAMMA)

// Typed access to one JSON object; errors name the file and the field.
class Object {
 public:
  Object(const json &j, const std::string &source, std::string where)
      : j_(j), source_(source), where_(std::move(where)) {}

  [[noreturn]] void bad(const char *key, const std::string &what) const {
    fail(VEGAS_ERR_FORMAT, "tuning profile " + source_ + ": " + where_ + key + " " + what);
  }
  bool has(const char *key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const json &get(const char *key) const {
    if (!has(key)) bad(key, "is missing");
    return j_.at(key);
  }

  int64_t integer(const char *key, int64_t lo, int64_t hi) const {
    const json &v = get(key);
    if (!v.is_number_integer()) bad(key, "must be an integer, got " + v.dump());
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
      bad(key,
          "is " + v.dump() + ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    const int64_t n = v.get<int64_t>();
    if (n < lo || n > hi)
      bad(key, "is " + std::to_string(n) + ", outside [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "]");
    return n;
  }
  // An upper bound: -1 (unbounded) or an integer >= lo.
  int64_t bound(const char *key, int64_t lo) const {
    const json &v = get(key);
    if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() == -1) return -1;
    return integer(key, lo, kMaxBound);
  }
  // A number in [lo, hi] (lo excluded when open_lo).
  float number(const char *key, double lo, double hi, bool open_lo) const {
    const json &v = get(key);
    if (!v.is_number()) bad(key, "must be a number, got " + v.dump());
    const double d = v.get<double>();
    const bool ok = std::isfinite(d) && (open_lo ? d > lo : d >= lo) && d <= hi;
    if (!ok) {
      std::ostringstream range;
      range << (open_lo ? "(" : "[") << lo << ", " << hi << "]";
      bad(key, "is " + v.dump() + ", outside " + range.str());
    }
    return static_cast<float>(d);
  }
  std::string string(const char *key) const {
    const json &v = get(key);
    if (!v.is_string()) bad(key, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }

 private:
  const json &j_;
  const std::string &source_;
  std::string where_;
};

TuningBucket parse_bucket(const json &j, const std::string &source, size_t index) {
  const std::string where = "buckets[" + std::to_string(index) + "].";
  if (!j.is_object())
    fail(VEGAS_ERR_FORMAT, "tuning profile " + source + ": " + where.substr(0, where.size() - 1) +
                               " must be an object, got " + j.dump());
  const Object o(j, source, where);
  TuningBucket b;
  b.context_min = o.integer("context_min", 0, kMaxBound);
  b.context_max = o.bound("context_max", b.context_min + 1);
  b.batch_min = o.integer("batch_min", 1, kMaxBound);
  b.batch_max = o.bound("batch_max", b.batch_min);
  b.policy = o.string("policy");
  // A hybrid "P+lookup" names a built-in sparse policy P.
  const std::string hybrid_of = lookup_hybrid_base(b.policy);
  const std::string &base = hybrid_of.empty() ? b.policy : hybrid_of;
  if (std::none_of(std::begin(kPolicies), std::end(kPolicies),
                   [&](const char *p) { return base == p; }) ||
      hybrid_of == "lookup")
    o.bad("policy", "is \"" + b.policy +
                        "\", not a built-in policy (vegas, vegas-all, specextend, streaming, "
                        "quest, topp, full, lookup, or P+lookup)");
  b.window_share = o.has("window_share") ? o.number("window_share", 0.0, 1.0, false) : 0.5f;
  b.gamma = static_cast<int32_t>(o.integer("gamma", 1, kMaxGamma));
  b.ratio = o.number("ratio", 0.0, 1.0, true);
  b.tau = o.has("tau") ? o.number("tau", 1.0, kMaxGamma + 1.0, false) : 0.0;
  b.speedup = o.has("speedup") ? o.number("speedup", 0.0, 1000.0, false) : 0.0;
  if (o.has("mode")) {
    const std::string mode = o.string("mode");
    if (mode != "vegas" && mode != "vanilla")
      o.bad("mode", "is \"" + mode + "\", not \"vegas\" or \"vanilla\"");
    b.vanilla = mode == "vanilla";
  }
  if (o.has("draft_model")) {
    const json &d = o.get("draft_model");
    if (!d.is_object()) o.bad("draft_model", "must be an object, got " + d.dump());
    const Object dm(d, source, where + "draft_model.");
    b.draft_model_gamma = static_cast<int32_t>(dm.integer("gamma", 1, kMaxGamma));
    b.draft_model_tau = dm.has("tau") ? dm.number("tau", 1.0, kMaxGamma + 1.0, false) : 0.0;
    b.draft_model_speedup = dm.has("speedup") ? dm.number("speedup", 0.0, 1000.0, false) : 0.0;
  }
  return b;
}

// How far `value` lies outside [lo, hi) (hi < 0: unbounded).
int64_t distance(int64_t value, int64_t lo, int64_t hi_exclusive) {
  if (value < lo) return lo - value;
  if (hi_exclusive >= 0 && value >= hi_exclusive) return value - (hi_exclusive - 1);
  return 0;
}

int64_t context_distance(const TuningBucket &b, int64_t context) {
  return distance(context, b.context_min, b.context_max);
}

int64_t batch_distance(const TuningBucket &b, int64_t batch) {
  return distance(batch, b.batch_min, b.batch_max < 0 ? -1 : b.batch_max + 1);
}

}  // namespace

std::shared_ptr<const TuningProfile> TuningProfile::builtin() {
  auto p = std::make_shared<TuningProfile>();
  p->source_ = "built-in";
  p->buckets_.push_back(TuningBucket{});
  return p;
}

std::shared_ptr<const TuningProfile> TuningProfile::parse(const std::string &text,
                                                          const std::string &source) {
  check_json_depth(text, "tuning profile " + source);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception &e) {
    fail(VEGAS_ERR_FORMAT, "tuning profile " + source + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) fail(VEGAS_ERR_FORMAT, "tuning profile " + source + " must be a JSON object");
  const Object top(j, source, "");
  const std::string format = top.string("format");
  if (format != kFormat)
    top.bad("format", "is \"" + format + "\", this libvegas reads \"" + kFormat + "\"");
  auto p = std::make_shared<TuningProfile>();
  p->source_ = source;
  p->backend_ = top.string("backend");
  if (p->backend_ != "cpu" && p->backend_ != "cuda")
    top.bad("backend", "is \"" + p->backend_ + "\", not \"cpu\" or \"cuda\"");
  const json &buckets = top.get("buckets");
  if (!buckets.is_array() || buckets.empty())
    top.bad("buckets", "must be a non-empty array, got " + buckets.dump());
  for (size_t i = 0; i < buckets.size(); ++i)
    p->buckets_.push_back(parse_bucket(buckets[i], source, i));
  return p;
}

std::shared_ptr<const TuningProfile> TuningProfile::load(const std::string &path) {
  return parse(read_small_file(path, size_t{16} << 20, "tuning profile"), path);
}

std::shared_ptr<const TuningProfile> TuningProfile::resolve(const std::string &named,
                                                            const std::string &model_dir,
                                                            const std::string &backend) {
  if (!named.empty()) {
    auto p = load(named);
    if (p->backend() != backend)
      fail(VEGAS_ERR_INVALID_ARGUMENT, "tuning profile " + named + " was made for backend \"" +
                                           p->backend() + "\", but the model runs on \"" + backend +
                                           "\"");
    return p;
  }
  if (!model_dir.empty()) {
    const std::string path = model_dir + "/vegas-profile.json";
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
      auto p = load(path);
      if (p->backend() == backend) return p;
    }
  }
  return builtin();
}

const TuningBucket &TuningProfile::lookup(int64_t context, int64_t batch) const {
  const TuningBucket *best = &buckets_.front();
  for (const TuningBucket &b : buckets_) {
    const int64_t dc = context_distance(b, context), db = batch_distance(b, batch);
    const int64_t best_dc = context_distance(*best, context);
    if (dc < best_dc || (dc == best_dc && db < batch_distance(*best, batch))) best = &b;
  }
  return *best;
}

int32_t TuningProfile::max_gamma() const {
  int32_t g = 1;
  for (const TuningBucket &b : buckets_) g = std::max({g, b.gamma, b.draft_model_gamma});
  return g;
}

const TuningBucket &TuningProfile::session_bucket() const {
  std::map<std::string, int32_t> votes;
  for (const TuningBucket &b : buckets_) votes[b.policy] += 1;
  const TuningBucket *best = &buckets_.front();
  for (const TuningBucket &b : buckets_)
    if (votes[b.policy] > votes[best->policy]) best = &b;
  return *best;
}

}  // namespace vegas
