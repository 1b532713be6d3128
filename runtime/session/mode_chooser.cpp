#include "session/mode_chooser.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace vegas {

namespace {

ModeChooser::Kind other(ModeChooser::Kind k) {
  return k == ModeChooser::Kind::kRound ? ModeChooser::Kind::kVanilla : ModeChooser::Kind::kRound;
}

// A probe outweighs the history of its kind, which may be old: one probe
// finds a kind that has become twice as fast (test_mode_chooser.cpp).
constexpr double kProbeDecay = 0.25;
// A bucket seen for the first time takes its nearest neighbour's sums at this
// weight: its own first observations soon dominate.
constexpr double kNeighbourWeight = 0.5;
// ... and keeps its neighbour's choice without a try when the slower kind
// reached less than this share of the faster one's rate there.
constexpr double kDecisive = 0.8;

}  // namespace

void ModeChooser::Rate::add(int64_t t, double s, double decay) {
  tokens = tokens * decay + static_cast<double>(t);
  seconds = seconds * decay + s;
  steps = steps * decay + 1.0;
  ++samples;
}

int32_t ModeChooser::Bucket::probe_interval() const {
  if (!explored()) return 0;
  const Rate &fast = of(best), &slow = of(other(best));
  // What a probe wastes: its step's time beyond what the faster kind needs
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

ModeChooser::Bucket &ModeChooser::bucket(int32_t n_decoding, const Prior &prior) {
  const int32_t b = bucket_of(n_decoding);
  auto it = buckets_.find(b);
  if (it != buckets_.end()) return it->second;
  Bucket fresh;
  if (prior.vanilla) {  // measured on this device already: no exploration of rounds
    fresh.best = Kind::kVanilla;
    fresh.prior_vanilla = true;
    return buckets_.emplace(b, fresh).first->second;
  }
  const Bucket *nearest = nullptr;
  int32_t distance = 0;
  for (const auto &entry : buckets_)
    if (entry.second.explored() && (!nearest || std::abs(entry.first - b) < distance)) {
      nearest = &entry.second;
      distance = std::abs(entry.first - b);
    }
  if (nearest != nullptr) {
    fresh.round = nearest->round;
    fresh.vanilla = nearest->vanilla;
    for (Rate *r : {&fresh.round, &fresh.vanilla}) {
      r->tokens *= kNeighbourWeight;
      r->seconds *= kNeighbourWeight;
      r->steps *= kNeighbourWeight;
    }
    fresh.best = nearest->best;
    // What paid at another batch may not here: unless it won by a wide margin
    // there, the slower kind is tried once.
    const double slower = fresh.of(other(fresh.best)).value(),
                 faster = fresh.of(fresh.best).value();
    if (slower >= kDecisive * faster) fresh.of(other(fresh.best)).samples = kMinSamples - 1;
  }
  return buckets_.emplace(b, fresh).first->second;
}

ModeChooser::Kind ModeChooser::next(int32_t n_decoding, const Prior &prior) {
  Bucket &b = bucket(n_decoding, prior);
  b.probing = false;
  if (b.prior_vanilla && b.round.samples < kMinSamples) {
    if (++b.since_probe < kPriorProbeSteps) return Kind::kVanilla;
    b.since_probe = 0;
    b.probing = true;
    return Kind::kRound;
  }
  if (b.round.samples < kMinSamples) return Kind::kRound;
  if (b.vanilla.samples < kMinSamples) return Kind::kVanilla;
  if (b.since_probe >= b.probe_interval()) {
    b.since_probe = 0;
    b.probing = true;
    return other(b.best);
  }
  ++b.since_probe;
  return b.best;
}

void ModeChooser::observe(Kind kind, int32_t n_decoding, int64_t tokens, double seconds) {
  if (!(seconds > 0.0) || tokens < 0) return;
  bool &warmed = warmed_[kind == Kind::kRound ? 0 : 1];
  if (!warmed) {
    warmed = true;  // the warm-up step: not counted
    return;
  }
  Bucket &b = bucket(n_decoding);
  const bool probe = b.probing && kind != b.best;
  b.of(kind).add(tokens, seconds, probe ? kProbeDecay : kDecay);
  if (b.explored()) b.best = b.round.value() >= b.vanilla.value() ? Kind::kRound : Kind::kVanilla;
}

double ModeChooser::rate(Kind kind, int32_t n_decoding) const {
  const auto it = buckets_.find(bucket_of(n_decoding));
  return it == buckets_.end() ? 0.0 : it->second.of(kind).value();
}

int32_t ModeChooser::probe_interval(int32_t n_decoding) const {
  const auto it = buckets_.find(bucket_of(n_decoding));
  return it == buckets_.end() ? 0 : it->second.probe_interval();
}

}  // namespace vegas
