// The tuning profile of automatic speculative settings (format "vegas-profile/1",
// written by `vegas tune`): per bucket of context length and batch size, the
// policy, window share, γ and ratio to start a sequence with. Sessions whose
// gamma, ratio or policy is "auto" start from it and refine γ and ratio at run
// time (refinement_controller.h). Without a profile the built-in table is used.
//
// File format (JSON; unknown keys are ignored):
//   { "format": "vegas-profile/1", "backend": "cpu" | "cuda",
//     "buckets": [ { "context_min": 0, "context_max": 4096,   // [min, max), -1 = unbounded
//                    "batch_min": 1, "batch_max": 4,          // [min, max], -1 = unbounded
//                    "policy": "vegas", "window_share": 0.5,  // window_share optional (0.5)
//                    "gamma": 6, "ratio": 0.07 }, ... ] }
// "model", "device", "created_by" and a bucket's "tau", "tokens_per_s" are
// informational. A bucket's "speedup" (its setting's tokens/s over vanilla's,
// optional) and "mode" ("vegas", the default, or "vanilla": Vegas did not pay
// there, `vegas tune` writes it when speedup < 1) guide auto mode
// (VEGAS_MODE_AUTO, session/mode_chooser.h). A bucket's optional
// "draft_model": {"gamma": 3, "tau": 2.1, "tokens_per_s": ..., "speedup": ...}
// (`vegas tune --draft-model`) is the separate draft model's best γ there:
// where a session that drafts with a draft model starts γ (its other knobs
// do not apply to model drafts).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vegas {

struct TuningBucket {
  int64_t context_min = 0;
  int64_t context_max = -1;  // exclusive; -1 = unbounded
  int64_t batch_min = 1;
  int64_t batch_max = -1;  // inclusive; -1 = unbounded
  std::string policy = "vegas";
  float window_share = 0.5f;
  int32_t gamma = 6;
  float ratio = 0.07f;
  // τ measured at this setting when the profile was made (optional "tau");
  // 0 = unknown. Auto mode trusts the setting while the rounds agree with it.
  double tau = 0.0;
  double speedup = 0.0;  // over vanilla when the profile was made; 0 = unknown
  bool vanilla = false;  // "mode": "vanilla": vanilla decoding was faster here
  // "draft_model": γ and τ of drafting with a separate draft model here; 0 =
  // not measured (a session with a draft model then starts at `gamma`).
  int32_t draft_model_gamma = 0;
  double draft_model_tau = 0.0;
  double draft_model_speedup = 0.0;  // 0 = unknown

  // Whether vanilla decoding was measured faster here than this bucket's
  // drafting: the draft model's (draft_model; unknown unless measured) or the
  // model's own.
  bool vanilla_for(bool draft_model) const {
    if (!draft_model) return vanilla;
    return draft_model_gamma > 0 && draft_model_speedup > 0.0 && draft_model_speedup < 1.0;
  }

  bool contains(int64_t context, int64_t batch) const {
    return context >= context_min && (context_max < 0 || context < context_max) &&
           batch >= batch_min && (batch_max < 0 || batch <= batch_max);
  }
};

class TuningProfile {
 public:
  // The table used when no profile file applies: one bucket for every context
  // and batch with the setting measured best on the H100 (README, "Measured":
  // vegas, window 50%, γ 6, ratio 0.07); on the CPU a γ sweep at 2K (4..16)
  // was flat within a few percent around it.
  static std::shared_ptr<const TuningProfile> builtin();
  // Throws FORMAT naming `source` and the field at fault.
  static std::shared_ptr<const TuningProfile> parse(const std::string &text,
                                                    const std::string &source);
  // Throws IO (missing or unreadable file) or FORMAT.
  static std::shared_ptr<const TuningProfile> load(const std::string &path);
  // The profile a session uses (vegas_session_options.profile_path):
  //  - `named` non-empty: that file; IO/FORMAT when missing or bad, and
  //    INVALID_ARGUMENT when it was made for another backend;
  //  - else <model_dir>/vegas-profile.json when model_dir is non-empty and the
  //    file exists (FORMAT when it is bad; a profile of another backend is
  //    skipped: a model directory may carry the profile of a GPU machine);
  //  - else the built-in table.
  // `backend` is "cpu" or "cuda".
  static std::shared_ptr<const TuningProfile> resolve(const std::string &named,
                                                      const std::string &model_dir,
                                                      const std::string &backend);

  // "cpu", "cuda", or "" for the built-in table (any backend).
  const std::string &backend() const { return backend_; }
  // The file it was read from, or "built-in".
  const std::string &source() const { return source_; }
  const std::vector<TuningBucket> &buckets() const { return buckets_; }

  // The first bucket (file order) containing both values; when none does, the
  // nearest by context, then by batch, then the first in file order.
  const TuningBucket &lookup(int64_t context, int64_t batch) const;
  // The largest γ of any bucket, the draft model's included.
  int32_t max_gamma() const;
  // The bucket whose policy a session uses when its policy is "auto": the
  // first bucket naming the policy most buckets name (a session has one
  // policy: it decides what the backend context captures; see
  // speculative_decoder.h).
  const TuningBucket &session_bucket() const;

 private:
  std::string backend_;
  std::string source_;
  std::vector<TuningBucket> buckets_;
};

}  // namespace vegas
