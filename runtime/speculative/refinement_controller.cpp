#include "speculative/refinement_controller.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "select/select_options.h"

namespace vegas {

namespace {

struct MeanAndError {
  double mean = 0.0;
  double error = 0.0;  // standard error of the mean
  size_t n = 0;
};

template <typename It>
MeanAndError mean_and_error(It begin, It end) {
  MeanAndError m;
  double sum = 0.0, sum_sq = 0.0;
  for (It it = begin; it != end; ++it, ++m.n) {
    sum += *it;
    sum_sq += *it * *it;
  }
  if (m.n == 0) return m;
  m.mean = sum / m.n;
  if (m.n > 1) {
    const double var = std::max(0.0, (sum_sq - m.n * m.mean * m.mean) / (m.n - 1));
    m.error = std::sqrt(var / m.n);
  }
  return m;
}

}  // namespace

RefinementController::RefinementController(const RefinementConfig &config, KnobSetting start)
    : config_(config),
      adopted_(start),
      acceptance_(fresh_acceptance()),
      cost_(kDraftCostEmaWeight, kVerifyCostEmaWeight, kVerifyFixedRowsPrior, kSlopePriorWeight),
      // The first probe may start as soon as its baseline window is full.
      rounds_since_probe_(config.probe_interval) {
  config_.gamma_max = std::max(config_.gamma_max, config_.gamma_min);
  adopted_.gamma = std::clamp(adopted_.gamma, config_.gamma_min, config_.gamma_max);
}

AcceptanceEstimate RefinementController::fresh_acceptance() const {
  return AcceptanceEstimate(config_.gamma_max, kAcceptanceEmaWeight, kAlphaPrior, kAlphaPriorRounds,
                            kAlphaShrinkRounds);
}

KnobSetting RefinementController::current() const {
  KnobSetting s = adopted_;
  if (probe_) s.ratio = probe_->ratio;
  return s;
}

std::optional<SwitchEvent> RefinementController::observe(const RoundObservation &obs) {
  rounds_ += 1;
  rounds_since_switch_ += 1;
  const int32_t committed = obs.accepted + 1;
  const double round_seconds = obs.drafted * obs.draft_step_seconds + obs.verify_seconds;
  others_rows_ = std::max(0, obs.verify_rows - (obs.drafted + 1));
  // The verify line does not depend on the ratio: probes feed it too.
  cost_.observe_verify(obs.verify_rows, obs.verify_seconds);
  if (probe_) return observe_probe(obs, round_seconds);

  if (obs.drafted > 0) cost_.observe_draft_step(obs.draft_step_seconds);
  acceptance_.observe(obs.drafted, obs.accepted);
  if (!profile_contradicted_ && switches_ == 0) {
    start_rounds_ += 1;
    start_sum_ += committed;
    start_squares_ += static_cast<double>(committed) * committed;
  }
  tau_sum_ += kAcceptanceEmaWeight * (committed - tau_sum_);
  tau_w_ += kAcceptanceEmaWeight * (1.0 - tau_w_);
  if (round_seconds > 0.0) baseline_.push_back(committed / round_seconds);
  while (static_cast<int32_t>(baseline_.size()) > config_.probe_rounds) baseline_.pop_front();
  rounds_since_probe_ += 1;

  if (rounds_ <= config_.warmup_rounds || switches_ >= config_.max_switches) return std::nullopt;
  if (config_.expected_tau > 0.0 && !profile_contradicted_) {
    const bool pooled = others_rows_ > 0 && obs.pool_rounds > 0;
    const double n = static_cast<double>(pooled ? obs.pool_rounds : start_rounds_);
    const double mean = (pooled ? obs.pool_sum : start_sum_) / n;
    const double squares = pooled ? obs.pool_squares : start_squares_;
    const double variance = std::max(0.0, squares / n - mean * mean);
    const double error = std::sqrt(variance / std::max(1.0, n - 1.0));
    const double deviation = std::abs(mean - config_.expected_tau);
    if (deviation <= config_.trust_band * config_.expected_tau ||
        deviation <= kProfileStandardErrors * error)
      return std::nullopt;
    profile_contradicted_ = true;
  }
  if (config_.tune_gamma) {
    if (std::optional<SwitchEvent> s = decide_gamma()) return s;
  }
  if (config_.tune_ratio && winning_rounds_ == 0) maybe_start_probe(obs.context);
  return std::nullopt;
}

double RefinementController::predicted_rate(int32_t gamma) const {
  if (!cost_.ready()) return 0.0;
  const double seconds = gamma * cost_.draft_step_seconds() +
                         cost_.verify_seconds(static_cast<double>(others_rows_) + gamma + 1);
  return seconds > 0.0 ? acceptance_.expected_tokens(gamma) / seconds : 0.0;
}

int32_t RefinementController::best_gamma() const {
  const int32_t reach =
      std::min(config_.gamma_max, kGammaGrowthFactor * adopted_.gamma + kGammaGrowthAdd);
  int32_t best = config_.gamma_min;
  double best_rate = predicted_rate(best);
  for (int32_t g = config_.gamma_min + 1; g <= reach; ++g) {
    const double rate = predicted_rate(g);
    if (rate > best_rate) {  // ties keep the shorter γ
      best = g;
      best_rate = rate;
    }
  }
  return best;
}

std::optional<SwitchEvent> RefinementController::decide_gamma() {
  // After a switch, let the new γ show its own acceptance first.
  if (switches_ > 0 && rounds_since_switch_ <= config_.window_rounds) return std::nullopt;
  if (!cost_.ready()) return std::nullopt;
  const int32_t best = best_gamma();
  const bool wins =
      best != adopted_.gamma &&
      predicted_rate(best) > predicted_rate(adopted_.gamma) * (1.0 + config_.switch_margin);
  winning_rounds_ = wins ? winning_rounds_ + 1 : 0;
  if (winning_rounds_ < config_.window_rounds) return std::nullopt;
  winning_rounds_ = 0;
  KnobSetting to = adopted_;
  to.gamma = best;
  return make_switch(to);
}

SwitchEvent RefinementController::make_switch(KnobSetting to) {
  SwitchEvent e;
  e.round = rounds_;
  e.from = adopted_;
  e.to = to;
  e.tau_ema = tau_ema();
  adopted_ = to;
  switches_ += 1;
  rounds_since_switch_ = 0;
  baseline_.clear();  // it measured the old setting
  return e;
}

std::optional<float> RefinementController::neighbour(int32_t direction, int32_t context) const {
  const double step = direction > 0 ? config_.ratio_step : 1.0 / config_.ratio_step;
  const float ratio =
      std::clamp(static_cast<float>(adopted_.ratio * step), config_.ratio_min, config_.ratio_max);
  if (ratio == adopted_.ratio) return std::nullopt;
  if (selection_budget(context, ratio, config_.min_tokens) ==
      selection_budget(context, adopted_.ratio, config_.min_tokens))
    return std::nullopt;  // the same selection: nothing to learn
  return ratio;
}

void RefinementController::maybe_start_probe(int32_t context) {
  if (probes_ >= config_.max_probes || failed_in_a_row_ >= 2) return;
  if (static_cast<int32_t>(baseline_.size()) < config_.probe_rounds) return;
  if (rounds_since_probe_ < config_.probe_interval) return;
  std::optional<float> ratio = neighbour(direction_, context);
  if (!ratio) {
    ratio = neighbour(-direction_, context);
    if (!ratio) return;
    direction_ = -direction_;
  }
  probe_ = Probe{*ratio, 0, {}, fresh_acceptance()};
  probes_ += 1;
}

std::optional<SwitchEvent> RefinementController::observe_probe(const RoundObservation &obs,
                                                               double round_seconds) {
  Probe &p = *probe_;
  p.rounds += 1;
  if (p.rounds > config_.probe_settle_rounds && round_seconds > 0.0) {
    p.rates.push_back((obs.accepted + 1) / round_seconds);
    p.acceptance.observe(obs.drafted, obs.accepted);
  }
  if (p.rounds < config_.probe_settle_rounds + config_.probe_rounds) return std::nullopt;
  Probe done = std::move(*probe_);
  probe_.reset();
  rounds_since_probe_ = 0;
  const MeanAndError base = mean_and_error(baseline_.begin(), baseline_.end());
  const MeanAndError tried = mean_and_error(done.rates.begin(), done.rates.end());
  const double gain = tried.mean - base.mean;
  const double noise = std::sqrt(base.error * base.error + tried.error * tried.error);
  if (switches_ < config_.max_switches && base.n > 1 && tried.n > 1 &&
      gain > config_.probe_margin * base.mean && gain > config_.probe_standard_errors * noise) {
    failed_in_a_row_ = 0;
    acceptance_ = std::move(done.acceptance);  // what the new ratio showed
    KnobSetting to = adopted_;
    to.ratio = done.ratio;
    return make_switch(to);
  }
  failed_in_a_row_ += 1;
  direction_ = -direction_;
  return std::nullopt;
}

}  // namespace vegas
