// build_distribution and its helpers; the order of the logit rules is
// documented in sampling.h.
#include "sampling/sampling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <string>
#include <utility>

#include "common/error.h"
#include "sampling/penalties.h"

namespace vegas {

namespace {

// Per-thread scratch so a decode loop does not allocate vocabulary-sized
// buffers for every token.
struct Scratch {
  std::vector<float> logits;
  std::vector<std::pair<int32_t, float>> edits;
  std::vector<int32_t> candidates;
  std::vector<float> weights;
  std::vector<int32_t> order;
  std::vector<float> values;
  std::vector<float> nucleus_weights;
};

Scratch &scratch() {
  thread_local Scratch s;
  return s;
}

struct LogitScan {
  float max = -INFINITY;
  int32_t n_finite = 0;
};

// Rejects NaN and +inf, finds the largest finite logit and counts the finite ones.
LogitScan scan_logits(const float *logits, int32_t n_vocab) {
  LogitScan scan;
  for (int32_t i = 0; i < n_vocab; ++i) {
    const float v = logits[i];
    if (std::isnan(v) || v == INFINITY)
      fail(VEGAS_ERR_INVALID_ARGUMENT,
           "logit " + std::to_string(i) + " is " + (std::isnan(v) ? "NaN" : "+inf") +
               " (after penalties); only finite values and -inf (masked) are allowed");
    if (v != -INFINITY) {
      ++scan.n_finite;
      scan.max = std::max(scan.max, v);
    }
  }
  if (scan.n_finite == 0)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "every one of the " + std::to_string(n_vocab) + " logits is -inf: nothing can be sampled");
  return scan;
}

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

// Number of leading entries (by descending logit, then ascending id) of the
// candidates whose weight reaches top_p of the total: the nucleus. Sorts only a
// growing prefix of `order` (positions into the candidates), not the whole set.
size_t nucleus_size(const float *logits, const std::vector<int32_t> &cand,
                    const std::vector<float> &weights, double total, float top_p,
                    std::vector<int32_t> *order) {
  order->resize(cand.size());
  for (size_t j = 0; j < cand.size(); ++j) (*order)[j] = static_cast<int32_t>(j);
  auto before = [&](int32_t a, int32_t b) {
    const float la = logits[cand[a]], lb = logits[cand[b]];
    return la > lb || (la == lb && cand[a] < cand[b]);
  };
  const double target = static_cast<double>(top_p) * total;
  size_t sorted = std::min<size_t>(cand.size(), 256);
  for (;;) {
    std::partial_sort(order->begin(), order->begin() + static_cast<std::ptrdiff_t>(sorted),
                      order->end(), before);
    double mass = 0.0;
    for (size_t r = 0; r < sorted; ++r) {
      mass += weights[(*order)[r]];
      if (mass >= target) return r + 1;
    }
    if (sorted == cand.size()) return cand.size();  // rounding: keep everything
    sorted = std::min(cand.size(), sorted * 4);
  }
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
  const LogitScan scan = scan_logits(l, n_vocab);

  out->ids.clear();
  out->probs.clear();
  if (params.greedy()) {
    out->ids.push_back(argmax(l, n_vocab));
    out->probs.push_back(1.0f);
    return;
  }

  // 3. Top-k (HF: keep every token >= the k-th largest logit, ties included).
  float threshold = -INFINITY;
  if (params.top_k > 0 && params.top_k < scan.n_finite)
    threshold = kth_largest(l, n_vocab, params.top_k, &s.values);
  std::vector<int32_t> &cand = s.candidates;
  cand.clear();
  for (int32_t i = 0; i < n_vocab; ++i)
    if (l[i] != -INFINITY && l[i] >= threshold) cand.push_back(i);

  // 2. Temperature: weights relative to the maximum (which is always kept, so
  // its weight is exactly 1). Subtracting before dividing cannot overflow.
  std::vector<float> &w = s.weights;
  w.resize(cand.size());
  const float t = params.temperature;
  double total = 0.0;
  for (size_t j = 0; j < cand.size(); ++j) {
    w[j] = std::exp((l[cand[j]] - scan.max) / t);
    total += w[j];
  }

  // 4. Top-p: mark the nucleus (order is by probability; the support stays in
  // id order, so mark then filter).
  if (params.top_p < 1.0f) {
    const size_t keep = nucleus_size(l, cand, w, total, params.top_p, &s.order);
    std::vector<float> &kept = s.nucleus_weights;
    kept.assign(cand.size(), 0.0f);
    for (size_t r = 0; r < keep; ++r) kept[s.order[r]] = w[s.order[r]];
    w.swap(kept);
  }

  // 5. Min-p relative to p_max (weight 1), 6. drop zero weights, renormalise.
  const float min_weight = params.min_p;
  double kept_total = 0.0;
  for (size_t j = 0; j < cand.size(); ++j) {
    if (w[j] > 0.0f && w[j] >= min_weight) {
      out->ids.push_back(cand[j]);
      out->probs.push_back(w[j]);
      kept_total += w[j];
    }
  }
  for (float &p : out->probs) p = static_cast<float>(p / kept_total);
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
