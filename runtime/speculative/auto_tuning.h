// Automatic speculative settings of a session (vegas_session_options: gamma 0,
// ratio 0, policy "auto"): where each sequence's γ, ratio and window share
// start (the tuning profile's bucket for its prompt length and the batch), the
// per-sequence refinement of γ and ratio (refinement_controller.h), and the
// session's log of switches.
//
// γ and the ratio are per sequence: a sequence with a smaller γ stops drafting
// earlier in the lockstep draft loop and verifies 1 + γ rows; its selection
// budget comes from its own ratio (BudgetKnobs). The window share is per
// sequence too (its bucket's, when the bucket names the session's policy).
// The policy is one per session: it decides what the backend context keeps for
// every sequence (score capture rows, per-page key bounds for quest, device
// selection), which is fixed when the context is created; with policy "auto"
// it is the policy most of the profile's buckets name.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "speculative/refinement_controller.h"
#include "speculative/tuning_profile.h"

namespace vegas {

// Which knobs are automatic.
struct AutoKnobs {
  bool gamma = false;
  bool ratio = false;
  bool policy = false;
  bool any() const { return gamma || ratio || policy; }
};

// The explicit session settings (used for the knobs that are not automatic).
struct FixedKnobs {
  std::string policy = "vegas";
  int32_t gamma = 6;
  float ratio = 0.07f;
  float window_share = 0.5f;
  int32_t min_tokens = 256;
  // A separate draft model drafts: an automatic γ starts at the bucket's
  // draft-model γ where the profile has one.
  bool draft_model = false;
};

// γ beyond this is not tried unless a profile names a longer one: a verify
// pass carries max_batch * (γ + 1) rows, which sizes the backend's buffers.
constexpr int32_t kAutoGammaCeiling = 16;
// Switches kept for vegas_session_get_switch (a long-lived server session
// must not grow without bound; the count in the statistics stays exact).
constexpr size_t kSwitchLogCapacity = 4096;

// What one sequence drafts with, and its controller when something is auto.
struct SequenceTuning {
  int32_t gamma = 6;
  float ratio = 0.07f;
  float window_share = 0.5f;
  int64_t switches = 0;
  std::optional<RefinementController> controller;
};

struct SwitchRecord {
  int32_t seq_id = 0;
  SwitchEvent event;
};

class AutoTuning {
 public:
  // `profile` may be null (the built-in table); `refinement` carries the
  // controller's constants (its tune flags, γ range and min_tokens are set here).
  AutoTuning(const AutoKnobs &autos, const FixedKnobs &fixed,
             std::shared_ptr<const TuningProfile> profile, const RefinementConfig &refinement);

  const AutoKnobs &autos() const { return autos_; }
  // The session's policy, and the ratio and window share it is built with
  // (sequences override them through BudgetKnobs).
  const std::string &policy() const { return policy_; }
  float session_ratio() const { return session_ratio_; }
  float session_window_share() const { return session_window_share_; }
  // The longest γ any sequence may use.
  int32_t max_gamma() const { return max_gamma_; }

  // The start of a sequence whose context is `context` tokens, decoded with
  // `batch` sequences.
  SequenceTuning start(int64_t context, int32_t batch) const;
  // Feeds one of its rounds to the sequence's controller; a switch changes
  // `t` and is logged.
  void observe(int32_t seq_id, SequenceTuning &t, const RoundObservation &obs);

  int64_t switches() const { return switches_; }
  // Switch `index` (0 = the session's first), or null when it is not kept.
  const SwitchRecord *switch_at(int64_t index) const;

 private:
  AutoKnobs autos_;
  FixedKnobs fixed_;
  std::shared_ptr<const TuningProfile> profile_;
  RefinementConfig config_;
  std::string policy_;
  float session_ratio_ = 0.07f;
  float session_window_share_ = 0.5f;
  int32_t max_gamma_ = 6;
  int64_t switches_ = 0;
  std::deque<SwitchRecord> log_;  // the last kSwitchLogCapacity switches
  // Rounds of sequences still at a profile bucket's setting, by that bucket's
  // τ (RoundObservation::pool_*).
  struct Pool {
    int64_t rounds = 0;
    double sum = 0.0, squares = 0.0;
  };
  std::map<double, Pool> pools_;
};

}  // namespace vegas
