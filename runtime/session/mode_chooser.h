// VEGAS_MODE_AUTO: whether a session's next decode step is a speculative
// round or a vanilla step, from what each has cost on this device, model and
// batch (issue P0-6, "auto never loses to vanilla"); with a hybrid policy
// (P+lookup, P+model) also which drafter a round takes, in auto mode and out
// of it, so that one chooser weighs every kind of step.
//
// The session reports every decode step it times (kind, sequences, tokens
// committed, wall seconds); the chooser keeps decaying sums of tokens,
// seconds and steps for each kind and runs the one with more tokens per
// second. Each kind is tried kMinSamples times first (rounds, alternate
// rounds, then vanilla steps), after one more step of it that is not
// counted: a kind's first step in a session pays one-time costs (graph
// capture, first kernel launches, buffers; 22m 2K x 64 on the H200: a first
// round of 14.9 ms, later ones 3.2 ms), which would bias the choice for a
// long time. Nor is a step that is the first decode step of many of its
// sequences (a new batch): it pays their one-time costs (observe()). After that each slower kind is
// probed now and then, so that a change (a longer context, another acceptance) is seen: a probe
// wastes what its step takes beyond the time the fastest kind needs for the same tokens, and probes
// are spaced so that this waste stays within kProbeBudget of the time spent (a kind that loses by
// half at 2K x 64 is probed every ~200 steps; two kinds within a few percent, every few steps).
//
// Rates are kept per batch bucket (log2 of the decoding sequences), since
// what pays depends on the batch; a bucket seen for the first time starts
// from the nearest measured one's rates (at half weight), instead of exploring
// from scratch, and tries the slower kind once unless it lost by a wide margin
// there (sequences finishing one by one at the end of a batch would otherwise
// pay a try in every bucket on the way down). A bucket that the draining
// batch comes back to after kStaleSteps steps away restarts the same way from
// the bucket it just left: on the H200 (8K x 16, a warm session) the last
// batch's tail had left its 8-15 bucket leading with vanilla steps, which then
// ran while lookup rounds paid 1.7x. A bucket of more sequences than any in
// use (a new batch) keeps its own rates.
//
// A tuning profile made on this device (`vegas tune`, which measures vanilla
// next to every setting) may say that Vegas did not pay for a bucket of
// context and batch (Prior): a batch bucket first seen with such a prior runs
// vanilla steps without exploring rounds, and tries a round only every
// kPriorProbeSteps steps (the first round of a session also pays one-time
// costs, which exploring would spend where the profile already knows the
// answer; with a hybrid policy the probes take each kind of round in turn).
// Two counted rounds of a kind later it chooses by its own measurements of
// that kind again.
//
// Pure bookkeeping: no clock, no backend, so that tests drive it with chosen
// costs. Session::step is its one writer.
#pragma once

#include <cstdint>
#include <map>

namespace vegas {

// What the tuning profile says of a step's bucket of context and batch.
struct ModePrior {
  bool vanilla = false;  // vanilla decoding was faster there (TuningBucket::vanilla)
};

class ModeChooser {
 public:
  // kRound: rounds of the policy's own drafter (its sparse passes, or its one
  // drafter); kVanilla: vanilla steps; kAlternate: rounds of a hybrid
  // policy's other drafter (P+lookup: prompt lookup, P+model: the draft
  // model), so that auto mode weighs all three kinds of step at once.
  enum class Kind { kRound, kVanilla, kAlternate };
  static constexpr int kKinds = 3;

  static constexpr int32_t kMinSamples = 2;
  static constexpr double kProbeBudget = 0.02;  // probes' waste, of the time spent
  static constexpr int32_t kMaxProbeInterval = 8192;
  static constexpr double kDecay = 0.75;  // weight of a kind's history per observation
  static constexpr int32_t kPriorProbeSteps = 1024;
  // A bucket unused for more steps than this restarts from a recently used
  // larger neighbour's rates when the batch drains back to it (bucket()).
  static constexpr int64_t kStaleSteps = 32;

  using Prior = ModePrior;

  // Chooses among rounds and, as asked, vanilla steps and alternate rounds
  // (explored in that order: rounds, alternate rounds, vanilla steps).
  explicit ModeChooser(bool vanilla = true, bool alternate = false);
  bool chooses(Kind kind) const { return chooses_[index(kind)]; }

  // The kind of the next decode step of n_decoding sequences; `prior` counts
  // when n_decoding's bucket is seen for the first time (it speaks for both
  // kinds of round: `vegas tune` measures the hybrids and lookup too).
  Kind next(int32_t n_decoding, const Prior &prior = {});
  // A timed decode step of `kind` over n_decoding sequences that committed
  // `tokens` tokens in `seconds` of wall time (nothing else in the step).
  // `first_decodes`: how many of its sequences took their first decode step
  // (after their prefill) in it. Such a step pays their one-time costs (a
  // round waits for the prompts' lookup indexes and makes their first
  // selections); where they are a quarter of the step or more it is not
  // counted. On the H200 (8K x 16) a batch's first lookup round took 1.6 ms
  // for 31 tokens against 0.6 ms for ~75 later, and counted, it made a warm
  // session run vanilla steps for a third of the batch. A sequence arriving
  // now and then (a server's stream) leaves the steps counted.
  void observe(Kind kind, int32_t n_decoding, int64_t tokens, double seconds,
               int32_t first_decodes = 0);

  // The kind n_decoding's bucket runs when it neither explores nor probes
  // (kRound for a bucket not seen yet).
  Kind leading(int32_t n_decoding) const;
  // Tokens per second of each kind in n_decoding's bucket (0 = not measured).
  double rate(Kind kind, int32_t n_decoding) const;
  // Steps of the fastest kind between probes of a slower one (the most
  // often probed), in n_decoding's bucket (0 while exploring).
  int32_t probe_interval(int32_t n_decoding) const;

 private:
  struct Rate {
    double tokens = 0, seconds = 0, steps = 0;  // decayed sums
    int32_t samples = 0;
    double value() const { return seconds > 0 ? tokens / seconds : 0.0; }
    void add(int64_t t, double s, double decay);
  };
  struct Bucket {
    Rate rates[kKinds];
    Kind best = Kind::kRound;
    int32_t since_probe[kKinds] = {};  // steps of the fastest kind since kind k's last probe
    int32_t since_prior = 0;           // steps since the prior's last probe round
    int32_t prior_probes = 0;          // probe rounds the prior made
    bool probing = false;              // the step just chosen probes a slower kind
    bool prior_vanilla = false;  // started from a profile's "vanilla", rounds not yet measured
    int64_t last_used = 0;       // the chooser's step count when last used
    Rate &of(Kind k) { return rates[index(k)]; }
    const Rate &of(Kind k) const { return rates[index(k)]; }
  };
  static constexpr int index(Kind k) { return static_cast<int>(k); }
  static int32_t bucket_of(int32_t n_decoding);
  Bucket &bucket(int32_t n_decoding, const Prior &prior = {});
  // A bucket that starts from `nearest`'s rates (at half weight).
  Bucket seeded_from(const Bucket &nearest) const;
  // The explored bucket nearest to bucket b (another one), or null;
  // `recent_larger`: only a bucket of more sequences used within kStaleSteps.
  const Bucket *nearest_explored(int32_t b, bool recent_larger) const;
  // Whether kind k is measured before choosing: a kind this chooser runs,
  // but not a round kind under a vanilla prior before its probes measured it.
  bool to_explore(const Bucket &b, Kind k) const;
  bool explored(const Bucket &b) const;
  Kind fastest(const Bucket &b) const;
  int32_t probe_interval(const Bucket &b, Kind slow) const;

  bool chooses_[kKinds] = {true, true, false};
  std::map<int32_t, Bucket> buckets_;
  int64_t steps_ = 0;                            // next() calls
  bool warmed_[kKinds] = {false, false, false};  // [kind]: its first (uncounted) step is done
};

}  // namespace vegas
