#include "speculative/auto_tuning.h"

#include <algorithm>
#include <utility>

namespace vegas {

AutoTuning::AutoTuning(const AutoKnobs &autos, const FixedKnobs &fixed,
                       std::shared_ptr<const TuningProfile> profile,
                       const RefinementConfig &refinement)
    : autos_(autos),
      fixed_(fixed),
      profile_(profile ? std::move(profile) : TuningProfile::builtin()),
      config_(refinement) {
  const TuningBucket &session = profile_->session_bucket();
  policy_ = autos_.policy ? session.policy : fixed_.policy;
  session_ratio_ = autos_.ratio ? session.ratio : fixed_.ratio;
  session_window_share_ = autos_.policy ? session.window_share : fixed_.window_share;
  max_gamma_ = autos_.gamma ? std::max(kAutoGammaCeiling, profile_->max_gamma()) : fixed_.gamma;
  config_.tune_gamma = autos_.gamma;
  config_.tune_ratio = autos_.ratio;
  config_.gamma_min = autos_.gamma ? 1 : fixed_.gamma;
  config_.gamma_max = max_gamma_;
  config_.min_tokens = fixed_.min_tokens;
}

SequenceTuning AutoTuning::start(int64_t context, int32_t batch) const {
  const TuningBucket &b = profile_->lookup(context, batch);
  // With a draft model the bucket's draft-model γ, if measured, is its start.
  const bool model_start = fixed_.draft_model && b.draft_model_gamma > 0;
  const int32_t bucket_gamma = model_start ? b.draft_model_gamma : b.gamma;
  SequenceTuning t;
  t.gamma = autos_.gamma ? std::min(bucket_gamma, max_gamma_) : fixed_.gamma;
  t.ratio = autos_.ratio ? b.ratio : fixed_.ratio;
  t.window_share = !autos_.policy        ? fixed_.window_share
                   : b.policy == policy_ ? b.window_share
                                         : session_window_share_;
  if (autos_.gamma || autos_.ratio) {
    RefinementConfig config = config_;
    // The bucket's τ describes its own setting: trust it only when the
    // sequence starts there (every knob auto, the bucket's policy in use).
    if (model_start) {
      if (autos_.gamma && t.gamma == b.draft_model_gamma) config.expected_tau = b.draft_model_tau;
    } else if (autos_.gamma && autos_.ratio && autos_.policy && b.policy == policy_ &&
               t.gamma == b.gamma && !fixed_.draft_model) {
      config.expected_tau = b.tau;
    }
    t.controller.emplace(config, KnobSetting{t.gamma, t.ratio});
  }
  return t;
}

void AutoTuning::observe(int32_t seq_id, SequenceTuning &t, const RoundObservation &obs) {
  if (!t.controller) return;
  RoundObservation pooled = obs;
  if (t.controller->expected_tau() > 0.0 && t.controller->switches() == 0) {
    Pool &p = pools_[t.controller->expected_tau()];
    const double committed = obs.accepted + 1.0;
    p.rounds += 1;
    p.sum += committed;
    p.squares += committed * committed;
    pooled.pool_rounds = p.rounds;
    pooled.pool_sum = p.sum;
    pooled.pool_squares = p.squares;
  }
  const std::optional<SwitchEvent> s = t.controller->observe(pooled);
  const KnobSetting now = t.controller->current();  // a ratio probe shows here
  t.gamma = now.gamma;
  t.ratio = now.ratio;
  if (!s) return;
  t.switches += 1;
  switches_ += 1;
  log_.push_back({seq_id, *s});
  if (log_.size() > kSwitchLogCapacity) log_.pop_front();
}

const SwitchRecord *AutoTuning::switch_at(int64_t index) const {
  const int64_t first = switches_ - static_cast<int64_t>(log_.size());
  if (index < first || index >= switches_) return nullptr;
  return &log_[static_cast<size_t>(index - first)];
}

}  // namespace vegas
