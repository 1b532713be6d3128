// build_distribution and its helpers; the order of the logit rules is
// documented in sampling.h.
#include "sampling/sampling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <queue>
#include <string>
#include <utility>

#include "common/error.h"
#include "sampling/penalties.h"

namespace vegas {

namespace {

struct Ranked {
  float logit;
  int32_t pos;  // index into the candidates
};

// Per-thread scratch so a decode loop does not allocate vocabulary-sized
// buffers for every token.
struct Scratch {
  std::vector<float> logits;
  std::vector<std::pair<int32_t, float>> edits;
  std::vector<int32_t> candidates;
  std::vector<float> weights;
  std::vector<int32_t> order;
  std::vector<Ranked> ranked;
  std::vector<float> values;
  std::vector<float> nucleus_weights;
  std::vector<float> cand_logits;
  std::vector<uint16_t> buckets;
  std::vector<double> bucket_mass;
};

Scratch &scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

// Eight independent lanes break the max/count dependency chains (the compiler
// may not reassociate a float max by itself); the offending index is looked
// up only on error.
LogitScan scan_logits(const float *logits, int32_t n_vocab) {
  LogitScan scan;
  constexpr int kLanes = 8;
  float lane_max[kLanes];
  int32_t lane_finite[kLanes] = {};
  int32_t lane_bad[kLanes] = {};
  std::fill(lane_max, lane_max + kLanes, -INFINITY);
  const int32_t body = n_vocab - n_vocab % kLanes;
  for (int32_t i = 0; i < body; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const float v = logits[i + k];
      lane_bad[k] |= !(v < INFINITY);  // NaN or +inf
      lane_finite[k] += v > -INFINITY;
      lane_max[k] = v > lane_max[k] ? v : lane_max[k];
    }
  }
  for (int32_t i = body; i < n_vocab; ++i) {
    const float v = logits[i];
    lane_bad[0] |= !(v < INFINITY);
    lane_finite[0] += v > -INFINITY;
    lane_max[0] = v > lane_max[0] ? v : lane_max[0];
  }
  bool bad = false;
  int32_t finite = 0;
  float max = -INFINITY;
  for (int k = 0; k < kLanes; ++k) {
    bad |= lane_bad[k] != 0;
    finite += lane_finite[k];
    max = std::max(max, lane_max[k]);
  }
  if (bad) {
    for (int32_t i = 0; i < n_vocab; ++i)
      if (!(logits[i] < INFINITY))
        fail(VEGAS_ERR_INVALID_ARGUMENT,
             "logit " + std::to_string(i) + " is " + (std::isnan(logits[i]) ? "NaN" : "+inf") +
                 " (after penalties); only finite values and -inf (masked) are allowed");
  }
  if (finite == 0)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "every one of the " + std::to_string(n_vocab) + " logits is -inf: nothing can be sampled");
  scan.max = max;
  scan.n_finite = finite;
  return scan;
}

namespace {

// The k-th largest finite logit (1-based k < n_finite). A bounded min-heap is a
// single cheap pass for the usual small k; nth_element wins for large k.
float kth_largest(const float *logits, int32_t n_vocab, int32_t k, std::vector<float> *values) {
  if (k <= 1024) {
    std::priority_queue<float, std::vector<float>, std::greater<float>> heap;
    for (int32_t i = 0; i < n_vocab; ++i) {
      const float v = logits[i];
      if (v == -INFINITY) continue;
      if (static_cast<int32_t>(heap.size()) < k) {
        heap.push(v);
      } else if (v > heap.top()) {
        heap.pop();
        heap.push(v);
      }
    }
    return heap.top();
  }
  values->clear();
  for (int32_t i = 0; i < n_vocab; ++i)
    if (logits[i] != -INFINITY) values->push_back(logits[i]);
  std::nth_element(values->begin(), values->begin() + (k - 1), values->end(),
                   std::greater<float>());
  return (*values)[k - 1];
}

// The candidates of the logit buckets up to the one where the cumulative
// weight crosses `target` (the caller's nucleus), appended to s->ranked.
void bucket_prefix(const std::vector<float> &cand_logits, float max_logit,
                   const std::vector<float> &weights, double target, Scratch *s) {
  constexpr int32_t kBuckets = 4096;
  const size_t n = cand_logits.size();
  float min_logit = max_logit;
  for (float v : cand_logits) min_logit = std::min(min_logit, v);
  // In double, so neither the range of extreme logits nor its inverse overflows.
  const double range = static_cast<double>(max_logit) - min_logit;
  const double scale = range > 0.0 ? kBuckets / range : 0.0;
  s->buckets.resize(n);
  s->bucket_mass.assign(kBuckets, 0.0);
  for (size_t j = 0; j < n; ++j) {
    const double offset = (static_cast<double>(max_logit) - cand_logits[j]) * scale;
    const int32_t b = std::min(kBuckets - 1, static_cast<int32_t>(offset));
    s->buckets[j] = static_cast<uint16_t>(b);
    s->bucket_mass[b] += weights[j];
  }
  int32_t last = 0;
  for (double mass = 0.0; last < kBuckets - 1; ++last) {
    mass += s->bucket_mass[last];
    if (mass >= target) break;
  }
  for (size_t j = 0; j < n; ++j)
    if (s->buckets[j] <= last) s->ranked.push_back(Ranked{cand_logits[j], static_cast<int32_t>(j)});
}

// The nucleus: the candidates ranked first (descending logit, then ascending
// id) whose weight reaches top_p of the total, written to `order` as positions
// into the candidates. A full sort of a 152K vocabulary (or even nth_element,
// which mispredicts most branches) costs milliseconds, so a histogram of the
// weight mass over logit buckets first finds the bucket where the cumulative
// mass crosses top_p; only the candidates of that bucket and the ones above it
// are sorted. Buckets are a monotone function of the logit, so the result is
// exactly the prefix of the full ranking. A few candidates (top-k, or logit
// candidates) are sorted outright: clearing and scanning the 4096 buckets
// cost more than the sort (most of a 1.34 us distribution at top-k 20).
void nucleus(const std::vector<float> &cand_logits, float max_logit,
             const std::vector<float> &weights, double total, float top_p, Scratch *s) {
  constexpr size_t kSortOutright = 512;
  const double target = static_cast<double>(top_p) * total;
  std::vector<Ranked> &items = s->ranked;
  items.clear();
  if (cand_logits.size() <= kSortOutright) {
    // Sized once and written by index: push_back on the thread-local scratch
    // stored its end pointer back every element (most of a 20-candidate row).
    items.resize(cand_logits.size());
    for (size_t j = 0; j < cand_logits.size(); ++j)
      items[j] = Ranked{cand_logits[j], static_cast<int32_t>(j)};
  } else {
    bucket_prefix(cand_logits, max_logit, weights, target, s);
  }
  // Candidates are in ascending id order, so pos order is id order.
  std::sort(items.begin(), items.end(), [](const Ranked &x, const Ranked &y) {
    return x.logit > y.logit || (x.logit == y.logit && x.pos < y.pos);
  });
  s->order.clear();
  double cum = 0.0;
  for (const Ranked &item : items) {
    s->order.push_back(item.pos);
    cum += weights[item.pos];
    if (cum >= target) break;  // else (rounding) every item sorted here stays
  }
}

// Rules 2-6 (or greedy's argmax) over a row of n logits after the penalties:
// the vocabulary (ids == NULL: the id is the index) or a candidate list (ids
// ascending, the candidates of a k >= params.top_k). Both go through the same
// code, so a candidate list yields the row's distribution bit for bit.
void distribution_of_row(const float *l, const int32_t *ids, int32_t n, const LogitScan &scan,
                         const SamplingParams &params, TokenDistribution *out) {
  Scratch &s = scratch();
  auto id_of = [&](int32_t i) { return ids ? ids[i] : i; };
  out->ids.clear();
  out->probs.clear();
  if (params.greedy()) {
    // The scan found the maximum; its first occurrence is the lowest-index argmax.
    out->ids.push_back(id_of(static_cast<int32_t>(std::find(l, l + n, scan.max) - l)));
    out->probs.push_back(1.0f);
    return;
  }

  // 3. Top-k (HF: keep every token >= the k-th largest logit, ties included).
  float threshold = -INFINITY;
  if (params.top_k > 0 && params.top_k < scan.n_finite)
    threshold = kth_largest(l, n, params.top_k, &s.values);
  std::vector<int32_t> &cand = s.candidates;  // indices into l
  if (threshold == -INFINITY && scan.n_finite == n) {
    cand.resize(static_cast<size_t>(n));
    std::iota(cand.begin(), cand.end(), 0);
  } else {
    cand.clear();
    for (int32_t i = 0; i < n; ++i)
      if (l[i] != -INFINITY && l[i] >= threshold) cand.push_back(i);
  }
  std::vector<float> &cl = s.cand_logits;
  cl.resize(cand.size());
  for (size_t j = 0; j < cand.size(); ++j) cl[j] = l[cand[j]];

  // 2. Temperature: weights relative to the maximum (which is always kept, so
  // its weight is exactly 1). Subtracting before dividing cannot overflow.
  std::vector<float> &w = s.weights;
  w.resize(cand.size());
  const float t = params.temperature;
  double total = 0.0;
  for (size_t j = 0; j < cand.size(); ++j) {
    w[j] = std::exp((cl[j] - scan.max) / t);
    total += w[j];
  }

  // 4. Top-p: mark the nucleus (order is by probability; the support stays in
  // id order, so mark then filter).
  if (params.top_p < 1.0f) {
    nucleus(cl, scan.max, w, total, params.top_p, &s);
    std::vector<float> &kept = s.nucleus_weights;
    kept.assign(cand.size(), 0.0f);
    for (int32_t pos : s.order) kept[pos] = w[pos];
    w.swap(kept);
  }

  // 5. Min-p relative to p_max (weight 1), 6. drop zero weights, renormalise.
  const float min_weight = params.min_p;
  out->ids.resize(cand.size());
  out->probs.resize(cand.size());
  size_t kept = 0;
  double kept_total = 0.0;
  for (size_t j = 0; j < cand.size(); ++j) {
    if (w[j] > 0.0f && w[j] >= min_weight) {
      out->ids[kept] = id_of(cand[j]);
      out->probs[kept++] = w[j];
      kept_total += w[j];
    }
  }
  out->ids.resize(kept);
  out->probs.resize(kept);
  const float scale = static_cast<float>(1.0 / kept_total);
  for (float &p : out->probs) p *= scale;
}

}  // namespace

void validate_sampling_params(const SamplingParams &p) {
  auto bad = [](const std::string &field, const std::string &rule, float value) {
    fail(VEGAS_ERR_INVALID_ARGUMENT, "sampling option " + field + " = " + std::to_string(value) +
                                         " is out of range (" + rule + ")");
  };
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature))
    bad("temperature", "finite, >= 0", p.temperature);
  if (p.top_k < 0) bad("top_k", ">= 0", static_cast<float>(p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) bad("top_p", "0 < top_p <= 1", p.top_p);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) bad("min_p", "0 <= min_p <= 1", p.min_p);
  if (!(p.repetition_penalty > 0.0f) || std::isinf(p.repetition_penalty))
    bad("repetition_penalty", "finite, > 0", p.repetition_penalty);
  if (!std::isfinite(p.presence_penalty)) bad("presence_penalty", "finite", p.presence_penalty);
  if (!std::isfinite(p.frequency_penalty)) bad("frequency_penalty", "finite", p.frequency_penalty);
  if (p.penalty_last_n < -1) bad("penalty_last_n", ">= -1", static_cast<float>(p.penalty_last_n));
}

float TokenDistribution::prob_of(int32_t id) const {
  auto it = std::lower_bound(ids.begin(), ids.end(), id);
  if (it == ids.end() || *it != id) return 0.0f;
  return probs[static_cast<size_t>(it - ids.begin())];
}

int32_t argmax(const float *logits, int32_t n_vocab) {
  if (logits == nullptr || n_vocab <= 0)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "argmax needs at least one logit");
  int32_t best = -1;
  for (int32_t i = 0; i < n_vocab; ++i)
    if (!std::isnan(logits[i]) && (best < 0 || logits[i] > logits[best])) best = i;
  if (best < 0) fail(VEGAS_ERR_INVALID_ARGUMENT, "argmax: every logit is NaN");
  return best;
}

void build_distribution(const float *logits, int32_t n_vocab, const SamplingParams &params,
                        const std::vector<int32_t> &history, TokenDistribution *out) {
  if (logits == nullptr || out == nullptr || n_vocab <= 0)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "build_distribution needs logits, an output and n_vocab > 0");
  validate_sampling_params(params);
  Scratch &s = scratch();

  // 1. Penalties touch only the history's tokens; copy the row only if any.
  penalised_logits(logits, n_vocab, params, history, &s.edits);
  const float *l = logits;
  if (!s.edits.empty()) {
    s.logits.assign(logits, logits + n_vocab);
    for (const auto &e : s.edits) s.logits[e.first] = e.second;
    l = s.logits.data();
  }
  distribution_of_row(l, nullptr, n_vocab, scan_logits(l, n_vocab), params, out);
}

int32_t candidate_k(const SamplingParams &params) {
  if (params.has_penalties()) return 0;
  if (params.greedy()) return 1;
  return params.top_k >= 1 && params.top_k <= kMaxCandidateTopK ? params.top_k : 0;
}

void extract_candidates(const float *logits, int32_t n_vocab, int32_t k, LogitCandidates *out) {
  if (logits == nullptr || out == nullptr || n_vocab <= 0 || k < 1)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "extract_candidates needs logits, an output, n_vocab > 0 and k >= 1");
  const LogitScan scan = scan_logits(logits, n_vocab);
  // k = 1 (greedy): the scan's maximum is the largest logit.
  const float threshold = k >= scan.n_finite ? -INFINITY
                          : k == 1           ? scan.max
                                             : kth_largest(logits, n_vocab, k, &scratch().values);
  out->ids.clear();
  out->logits.clear();
  for (int32_t i = 0; i < n_vocab; ++i)
    if (logits[i] != -INFINITY && logits[i] >= threshold) {
      out->ids.push_back(i);
      out->logits.push_back(logits[i]);
    }
}

void build_distribution_from_candidates(const LogitCandidates &c, const SamplingParams &params,
                                        TokenDistribution *out) {
  if (out == nullptr)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "build_distribution_from_candidates needs an output");
  validate_sampling_params(params);
  if (candidate_k(params) == 0)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "these sampling options read the whole logit row (penalties, or top_k off or above " +
             std::to_string(kMaxCandidateTopK) + "), not its candidates");
  const size_t n = c.ids.size();
  if (n == 0 || c.logits.size() != n || n > static_cast<size_t>(INT32_MAX))
    fail(VEGAS_ERR_INVALID_ARGUMENT, "logit candidates: empty, or ids and logits differ in length");
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(c.logits[i]))
      fail(VEGAS_ERR_INVALID_ARGUMENT,
           "logit candidate " + std::to_string(c.ids[i]) + " is not finite");
    if (c.ids[i] < 0 || (i > 0 && c.ids[i] <= c.ids[i - 1]))
      fail(VEGAS_ERR_INVALID_ARGUMENT, "logit candidates: ids must be ascending and >= 0");
  }
  const int32_t count = static_cast<int32_t>(n);
  distribution_of_row(c.logits.data(), c.ids.data(), count, scan_logits(c.logits.data(), count),
                      params, out);
}

int32_t sample_from(const TokenDistribution &dist, double u) {
  if (dist.ids.empty() || dist.ids.size() != dist.probs.size())
    fail(VEGAS_ERR_INVALID_ARGUMENT, "sample_from: empty or inconsistent distribution");
  if (!(u >= 0.0 && u < 1.0))
    fail(VEGAS_ERR_INVALID_ARGUMENT, "sample_from: u = " + std::to_string(u) + " not in [0, 1)");
  double total = 0.0;
  for (float p : dist.probs) total += p;
  const double target = u * total;
  double cum = 0.0;
  int32_t last_positive = -1;
  for (size_t j = 0; j < dist.ids.size(); ++j) {
    if (dist.probs[j] <= 0.0f) continue;
    cum += dist.probs[j];
    last_positive = dist.ids[j];
    if (target < cum) return dist.ids[j];
  }
  if (last_positive < 0)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "sample_from: the distribution has no positive probability");
  return last_positive;  // u * total rounded up to the last boundary
}

}  // namespace vegas
