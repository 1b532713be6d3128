// Run-time refinement of one sequence's draft length γ and selection ratio
// (sessions with gamma 0 / ratio 0, "auto"), in the spirit of SSV's adaptive
// speculation: moving averages of what the rounds show, a warm-up before any
// decision, a hysteresis window before a switch, and a bounded number of
// switches per sequence.
//
// γ: from the per-position acceptance estimate α_i (acceptance_estimate.h) a
// round of γ' drafts is expected to commit E(γ') = 1 + Σ_{j≤γ'} Π_{i<j} α_i
// tokens (positions never reached take the last reached α) and to cost
// γ'·t_draft + t_verify(rows) seconds (round_cost_estimate.h; the rows of the
// other sequences of the batch stay as they were). The γ' of most tokens per
// second is the candidate; the controller switches to it when, for
// `window_rounds` consecutive rounds after the warm-up, some γ' ≠ γ was
// predicted to beat γ by more than `switch_margin`.
//
// Ratio: what a ratio does to acceptance cannot be predicted from the current
// rounds, so it is measured. A bounded probe: when γ is settled, the
// controller drafts `probe_rounds` rounds at a neighbouring ratio (× or ÷
// `ratio_step`) and compares their committed tokens per second of round with
// the same number of rounds just before at the adopted ratio; the neighbour is
// adopted (a switch) when the mean of its per-round tokens per second beats
// theirs by more than `probe_margin` and by more than `probe_standard_errors`
// standard errors of the difference; else the next probe goes the other way. Probes are spaced
// `probe_interval` rounds, at most `max_probes` per sequence, none when the neighbour's budget
// equals the current one (the min_tokens floor), and none once both directions failed in a row. The
// first `probe_settle_rounds` rounds of a probe are not counted: a device selection made during
// verification applies a new ratio one round late.
//
// Everything here is per sequence and deterministic given its observations.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "speculative/acceptance_estimate.h"
#include "speculative/round_cost_estimate.h"

namespace vegas {

// Rounds observed before any decision: the acceptance estimate needs several
// rounds (after 8, the data carries 74% of the estimate of position 0 and the
// prior 26%, with the weights below), and the first rounds after prefill pay
// one-time costs (graph captures, GEMM plans) that would bias t_draft.
constexpr int32_t kWarmupRounds = 8;
// Consecutive rounds a better γ must keep winning before the switch, and the
// rounds after a switch before the next decision: long enough that one lucky
// or unlucky round (greedy code acceptance is bursty) cannot flip γ.
constexpr int32_t kWindowRounds = 4;
// Switches per sequence (γ and ratio together): bounds the cost of a noisy
// or non-stationary sequence; three or four are enough to converge from a
// profile that is off by an order of magnitude.
constexpr int32_t kMaxSwitches = 4;
// Weight of a new round in the acceptance and τ averages: a memory of about
// 10 rounds, short enough to follow a sequence moving from boilerplate to new
// code, long enough to average bursty acceptance.
constexpr double kAcceptanceEmaWeight = 0.1;
// The acceptance prior before any round: typical of the sparse drafts of
// our model (README: τ 5 to 7 at γ 6), worth 2 draws so data wins fast.
constexpr double kAlphaPrior = 0.8;
constexpr double kAlphaPriorRounds = 2.0;
// Each position's acceptance leans on the pooled one with the weight of 3
// rounds (acceptance_estimate.h): on synthetic streams at α 0.9 this halves
// the γ switches that noise alone triggers, and a real drop at deep positions
// still shows within a few rounds.
constexpr double kAlphaShrinkRounds = 3.0;
// Cost averages move slower than acceptance: step costs only change with the
// context and the batch, and a slope fit needs the rows of earlier γs.
constexpr double kDraftCostEmaWeight = 0.1;
constexpr double kVerifyCostEmaWeight = 0.02;
// Prior of the verify line: the fixed part of a pass costs about 8 rows
// (measured on the CPU, embedded model, 2K context: 9.6 ms fixed + 1.35 ms
// per row; on a GPU the fixed part weighs more, so this prior errs towards
// shorter γ there until a second row count is seen).
constexpr double kVerifyFixedRowsPrior = 8.0;
constexpr double kSlopePriorWeight = 4.0;
// A γ must be predicted this much faster than the current one to count.
constexpr double kSwitchMargin = 0.05;
// A switch lengthens γ to at most 2γ + 2: positions past the current γ are
// extrapolated, not observed, and a run of fully accepted rounds extrapolates
// to "every γ is accepted", which always favours the longest γ (on the CPU a
// sequence went 3 -> 16 that way, 16 being 14% slower than 4).
constexpr int32_t kGammaGrowthFactor = 2;
constexpr int32_t kGammaGrowthAdd = 2;
// Ratio probes (see above): the window of tokens per second compared, its
// spacing and bound, the step between neighbours, the margin (wider than the
// γ margin: a measured window is noisier than a prediction), the standard
// errors the gain must also exceed (12 rounds of bursty acceptance vary by
// 15% or more; without it, a probe of a ratio no better than the current one
// was adopted on synthetic streams), and the range.
constexpr int32_t kProbeRounds = 12;
constexpr int32_t kProbeSettleRounds = 1;
constexpr int32_t kProbeInterval = 24;
constexpr int32_t kMaxProbes = 4;
constexpr double kRatioStep = 1.5;
constexpr double kProbeMargin = 0.1;
constexpr double kProbeStandardErrors = 2.0;
constexpr float kRatioMin = 0.01f;
constexpr float kRatioMax = 0.5f;
// A profile's setting was measured end to end (tokens per second of whole
// batches, which the per-sequence model below cannot see: on a GPU the batch
// shares each draft step, so one sequence's longer γ costs all of them). While
// the mean τ of the rounds at that setting stays within this share of the τ
// the profile recorded, or within kProfileStandardErrors of its standard
// error, the profile is taken as right and nothing is refined; once it leaves
// both (the profile is wrong for this prompt or machine), refinement starts.
// H100, public prompts at batch 16: per-sequence refinement of a tuned profile
// lost 44% of its throughput; per prompt at batch 1, τ at the tuned setting
// ranged over ±20% of the recorded τ. The error term keeps the noise of the
// first rounds (per-round τ varies by ~1 token) from ending the trust; a band
// on the moving average did, on one prompt in 16 (-29%).
constexpr double kProfileTrustBand = 0.2;
constexpr double kProfileStandardErrors = 2.0;

struct RefinementConfig {
  bool tune_gamma = true;
  bool tune_ratio = true;
  int32_t gamma_min = 1;
  int32_t gamma_max = 16;
  int32_t min_tokens = 256;  // the selection floor (a probe must change the budget)
  int32_t warmup_rounds = kWarmupRounds;
  int32_t window_rounds = kWindowRounds;
  int32_t max_switches = kMaxSwitches;
  double switch_margin = kSwitchMargin;
  int32_t probe_rounds = kProbeRounds;
  int32_t probe_settle_rounds = kProbeSettleRounds;
  int32_t probe_interval = kProbeInterval;
  int32_t max_probes = kMaxProbes;
  double ratio_step = kRatioStep;
  double probe_margin = kProbeMargin;
  double probe_standard_errors = kProbeStandardErrors;
  float ratio_min = kRatioMin;
  float ratio_max = kRatioMax;
  // The τ the start setting was measured at (TuningBucket::tau), 0 = unknown:
  // no refinement while the τ average stays within trust_band of it.
  double expected_tau = 0.0;
  double trust_band = kProfileTrustBand;
};

struct KnobSetting {
  int32_t gamma = 6;
  float ratio = 0.07f;
};

// One finished round of one sequence.
struct RoundObservation {
  int32_t drafted = 0;              // its drafts this round (γ, or fewer near max_tokens)
  int32_t accepted = 0;             // how many of them were accepted
  int32_t context = 0;              // its committed length: the candidates of its next selection
  double draft_step_seconds = 0.0;  // one draft forward step of the batch
  double verify_seconds = 0.0;      // the batch's verification pass
  int32_t verify_rows = 0;          // rows of that pass, all sequences (>= drafted + 1)
  // Decoding with other sequences, a profile's τ is judged on the pooled
  // rounds of every sequence of the session that started from the same bucket
  // and has not switched (AutoTuning fills these; pool_rounds 0 = no pool): the
  // profile's τ is a batch average, and one prompt's τ lies well off it (H100,
  // public 8K prompts at the tuned setting: 2.5 to 4.0 around 3.4).
  int64_t pool_rounds = 0;
  double pool_sum = 0.0, pool_squares = 0.0;
};

struct SwitchEvent {
  int64_t round = 0;  // rounds observed; the new setting applies from the next one
  KnobSetting from, to;
  double tau_ema = 0.0;
};

class RefinementController {
 public:
  RefinementController(const RefinementConfig &config, KnobSetting start);

  // Feeds one round; returns the switch it made, if any.
  std::optional<SwitchEvent> observe(const RoundObservation &obs);

  // What the next round uses (a ratio probe shows here).
  KnobSetting current() const;
  // The setting adopted so far (without a running probe).
  KnobSetting adopted() const { return adopted_; }
  int64_t rounds() const { return rounds_; }
  int32_t switches() const { return switches_; }
  int32_t probes() const { return probes_; }
  bool probing() const { return probe_.has_value(); }
  double tau_ema() const { return tau_w_ > 0.0 ? tau_sum_ / tau_w_ : 0.0; }
  const AcceptanceEstimate &acceptance() const { return acceptance_; }
  double expected_tau() const { return config_.expected_tau; }
  const RoundCostEstimate &cost() const { return cost_; }

  // Predicted committed tokens per second with `gamma` drafts (0 before any
  // cost was measured), and the γ that maximises it in [gamma_min, gamma_max]
  // within a switch's reach (kGammaGrowthFactor) of the current γ.
  double predicted_rate(int32_t gamma) const;
  int32_t best_gamma() const;

 private:
  struct Probe {
    float ratio = 0.0f;
    int32_t rounds = 0;
    std::vector<double> rates;  // committed tokens per second of each counted round
    AcceptanceEstimate acceptance;
  };

  std::optional<SwitchEvent> decide_gamma();
  std::optional<SwitchEvent> observe_probe(const RoundObservation &obs, double round_seconds);
  void maybe_start_probe(int32_t context);
  std::optional<float> neighbour(int32_t direction, int32_t context) const;
  SwitchEvent make_switch(KnobSetting to);
  AcceptanceEstimate fresh_acceptance() const;

  RefinementConfig config_;
  KnobSetting adopted_;
  AcceptanceEstimate acceptance_;
  RoundCostEstimate cost_;
  int64_t rounds_ = 0;
  int32_t switches_ = 0;
  int32_t rounds_since_switch_ = 0;
  bool profile_contradicted_ = false;  // the mean τ left the profile's band
  int64_t start_rounds_ = 0;           // rounds at the start setting, for that mean
  double start_sum_ = 0.0, start_squares_ = 0.0;
  int32_t winning_rounds_ = 0;  // consecutive rounds some other γ won by the margin
  double tau_sum_ = 0.0, tau_w_ = 0.0;
  int32_t others_rows_ = 0;  // verify rows of the other sequences in the last round
  // Ratio probes.
  std::optional<Probe> probe_;
  std::deque<double> baseline_;  // tokens per second of the last probe_rounds rounds at adopted_
  int32_t probes_ = 0;
  int32_t rounds_since_probe_ = 0;
  int32_t direction_ = -1;  // -1: a smaller ratio next, +1: a larger one
  int32_t failed_in_a_row_ = 0;
};

}  // namespace vegas
