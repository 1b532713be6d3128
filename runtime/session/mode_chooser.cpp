#include "session/mode_chooser.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace vegas {

namespace {

using Kind = ModeChooser::Kind;

// The order kinds are explored in (and win ties in).
constexpr Kind kOrder[] = {Kind::kRound, Kind::kAlternate, Kind::kVanilla};

// A probe outweighs the history of its kind, which may be old: one probe
// finds a kind that has become twice as fast (test_mode_chooser.cpp).
constexpr double kProbeDecay = 0.25;
// A bucket seen for the first time takes its nearest neighbour's sums at this
// weight: its own first observations soon dominate.
constexpr double kNeighbourWeight = 0.5;
// ... and keeps its neighbour's choice without a try of a slower kind that
// reached less than this share of the fastest one's rate there.
constexpr double kDecisive = 0.8;
// A step is a new batch's (not counted) when at least 1/kNewBatchShare of its
// sequences take their first decode step in it.
constexpr int64_t kNewBatchShare = 4;

}  // namespace

ModeChooser::ModeChooser(bool vanilla, bool alternate) {
  chooses_[index(Kind::kVanilla)] = vanilla;
  chooses_[index(Kind::kAlternate)] = alternate;
}

void ModeChooser::Rate::add(int64_t t, double s, double decay) {
  tokens = tokens * decay + static_cast<double>(t);
  seconds = seconds * decay + s;
  steps = steps * decay + 1.0;
  ++samples;
}

bool ModeChooser::to_explore(const Bucket &b, Kind k) const {
  return chooses(k) && !(k != Kind::kVanilla && b.prior_vanilla && b.of(k).samples < kMinSamples);
}

bool ModeChooser::explored(const Bucket &b) const {
  for (const Kind k : kOrder)
    if (to_explore(b, k) && b.of(k).samples < kMinSamples) return false;
  return true;
}

ModeChooser::Kind ModeChooser::fastest(const Bucket &b) const {
  Kind best = b.best;
  double rate = -1.0;
  for (const Kind k : kOrder)
    if (to_explore(b, k) && b.of(k).value() > rate) {
      best = k;
      rate = b.of(k).value();
    }
  return best;
}

int32_t ModeChooser::probe_interval(const Bucket &b, Kind slow_kind) const {
  const Rate &fast = b.of(b.best), &slow = b.of(slow_kind);
  if (!(slow.steps > 0.0) || !(fast.value() > 0.0)) return 1;
  // What a probe wastes: its step's time beyond what the fastest kind needs
  // for the same tokens.
  const double slow_step = slow.seconds / slow.steps, slow_tokens = slow.tokens / slow.steps;
  const double lost = std::max(0.0, slow_step - slow_tokens / fast.value());
  const double fast_step = fast.seconds / fast.steps;
  const double steps = std::ceil(lost / (kProbeBudget * fast_step));
  return static_cast<int32_t>(std::clamp(steps, 1.0, double{kMaxProbeInterval}));
}

int32_t ModeChooser::bucket_of(int32_t n_decoding) {
  int32_t b = 0;
  while (b < 30 && (int32_t{1} << (b + 1)) <= n_decoding) ++b;
  return b;
}

ModeChooser::Bucket ModeChooser::seeded_from(const Bucket &nearest) const {
  Bucket fresh;
  for (const Kind k : kOrder) {
    Rate &r = fresh.of(k);
    r = nearest.of(k);
    r.tokens *= kNeighbourWeight;
    r.seconds *= kNeighbourWeight;
    r.steps *= kNeighbourWeight;
  }
  fresh.best = nearest.best;
  // What paid at another batch may not here: unless it won by a wide margin
  // there, each slower kind is tried once.
  const double faster = fresh.of(fresh.best).value();
  for (const Kind k : kOrder)
    if (k != fresh.best && chooses(k) && fresh.of(k).value() >= kDecisive * faster)
      fresh.of(k).samples = kMinSamples - 1;
  return fresh;
}

const ModeChooser::Bucket *ModeChooser::nearest_explored(int32_t b, bool recent_larger) const {
  const Bucket *nearest = nullptr;
  int32_t distance = 0;
  for (const auto &entry : buckets_)
    if (entry.first != b && explored(entry.second) &&
        (!recent_larger || (entry.first > b && steps_ - entry.second.last_used <= kStaleSteps)) &&
        (!nearest || std::abs(entry.first - b) < distance)) {
      nearest = &entry.second;
      distance = std::abs(entry.first - b);
    }
  return nearest;
}

ModeChooser::Bucket &ModeChooser::bucket(int32_t n_decoding, const Prior &prior) {
  const int32_t b = bucket_of(n_decoding);
  auto it = buckets_.find(b);
  if (it != buckets_.end()) {
    Bucket &old = it->second;
    // Back after a while as the batch drains: its rates are the last batch's
    // tail's (rounds cut short near max_tokens), and the bucket the batch
    // just left knows better. A batch that grows back keeps the bucket's
    // own rates: they come from the last batch at that size.
    if (steps_ - old.last_used > kStaleSteps && !old.prior_vanilla)
      if (const Bucket *recent = nearest_explored(b, true)) old = seeded_from(*recent);
    old.last_used = steps_;
    return old;
  }
  Bucket fresh;
  if (prior.vanilla && chooses(Kind::kVanilla)) {
    // Measured on this device already: no exploration of rounds.
    fresh.best = Kind::kVanilla;
    fresh.prior_vanilla = true;
  } else if (const Bucket *nearest = nearest_explored(b, false)) {
    fresh = seeded_from(*nearest);
  }
  fresh.last_used = steps_;
  return buckets_.emplace(b, fresh).first->second;
}

ModeChooser::Kind ModeChooser::next(int32_t n_decoding, const Prior &prior) {
  ++steps_;
  Bucket &b = bucket(n_decoding, prior);
  b.probing = false;
  // Under a vanilla prior, a probe every kPriorProbeSteps steps of each
  // round kind not yet measured, in turn.
  if (b.prior_vanilla) {
    Kind unmeasured[2];
    int32_t n = 0;
    for (const Kind k : {Kind::kRound, Kind::kAlternate})
      if (chooses(k) && b.of(k).samples < kMinSamples) unmeasured[n++] = k;
    if (n > 0 && ++b.since_prior >= kPriorProbeSteps) {
      b.since_prior = 0;
      b.probing = true;
      return unmeasured[b.prior_probes++ % n];
    }
  }
  for (const Kind k : kOrder)
    if (to_explore(b, k) && b.of(k).samples < kMinSamples) return k;
  for (const Kind k : kOrder)
    if (k != b.best && to_explore(b, k) && b.since_probe[index(k)] >= probe_interval(b, k)) {
      b.since_probe[index(k)] = 0;
      b.probing = true;
      return k;
    }
  for (const Kind k : kOrder)
    if (k != b.best) ++b.since_probe[index(k)];
  return b.best;
}

void ModeChooser::observe(Kind kind, int32_t n_decoding, int64_t tokens, double seconds,
                          int32_t first_decodes) {
  if (!(seconds > 0.0) || tokens < 0) return;
  bool &warmed = warmed_[index(kind)];
  if (!warmed) {
    warmed = true;  // the warm-up step: not counted
    return;
  }
  if (int64_t{first_decodes} * kNewBatchShare >= n_decoding) return;
  Bucket &b = bucket(n_decoding);
  const bool probe = b.probing && kind != b.best;
  b.of(kind).add(tokens, seconds, probe ? kProbeDecay : kDecay);
  if (explored(b)) b.best = fastest(b);
}

ModeChooser::Kind ModeChooser::leading(int32_t n_decoding) const {
  const auto it = buckets_.find(bucket_of(n_decoding));
  return it == buckets_.end() ? Kind::kRound : it->second.best;
}

double ModeChooser::rate(Kind kind, int32_t n_decoding) const {
  const auto it = buckets_.find(bucket_of(n_decoding));
  return it == buckets_.end() ? 0.0 : it->second.of(kind).value();
}

int32_t ModeChooser::probe_interval(int32_t n_decoding) const {
  const auto it = buckets_.find(bucket_of(n_decoding));
  if (it == buckets_.end() || !explored(it->second)) return 0;
  const Bucket &b = it->second;
  int32_t interval = 0;
  for (const Kind k : kOrder)
    if (k != b.best && to_explore(b, k)) {
      const int32_t i = probe_interval(b, k);
      interval = interval == 0 ? i : std::min(interval, i);
    }
  return interval;
}

}  // namespace vegas
