// The measurement shared by `vegas bench`, `vegas bench --report` and `vegas
// tune`: load a model once, make prompts of a given length, run one generation
// in a fresh session and time its prefill and decode.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "vegas.h"

namespace vegas_cli {

using Prompts = std::vector<std::vector<int32_t>>;

struct ModelArgs {
  std::string model_dir;
  std::string synthetic;  // config.json for random weights (no tokenizer, CUDA)
  std::string backend = "auto";
  int32_t threads = 0;
  uint64_t seed = 1;  // synthetic weights
};

struct LoadedModel {
  ModelPtr model{nullptr, vegas_model_free};
  vegas_model_info info{};
  std::string name;    // the model directory's (or synthetic config's) base name
  std::string device;  // informational: the CPU's or GPU's name
};
LoadedModel load_model(const ModelArgs &a);
// The draft model of `target`'s runs (--draft-model DIR): loaded from `dir`
// on the target's backend and threads.
LoadedModel load_draft_model(const ModelArgs &target, const std::string &dir);

// Every line of a JSONL file (field `text`) tokenized, untruncated. Fails with
// a message naming the file and line.
Prompts read_prompt_file(const std::string &path, const vegas_tokenizer *tok, const char *command);
// `batch` prompts from `all`, each cut to at most `context` tokens: those
// whose cut length is nearest `context` (cycling over the 8 nearest).
Prompts pick_prompts(const Prompts &all, int32_t context, int32_t batch);
// `batch` prompts of `context` random ids in [16, vocab).
Prompts random_prompts(int32_t context, int32_t batch, uint64_t seed, int32_t vocab);
// Mean prompt length.
double mean_length(const Prompts &prompts);

struct SamplingArgs {
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 1;  // sequence i samples with seed + i, the same in every run
};
// The library's sampling options for these arguments (seed included).
vegas_sampling_options sampling_options(const SamplingArgs &a);

// The speculative settings of one run. `label` names it in JSON and plots:
// "policy" or "policy:window_share".
struct SpecSettings {
  std::string label = "vegas";
  std::string policy = "vegas";
  float window_share = 0.5f;
  int32_t gamma = 6;
  float ratio = 0.07f;
  int32_t min_tokens = 256;
  int32_t sink = 16;
  std::string score_kind = "weight";
  int32_t tree_branches = 1;  // token trees (vegas_session_options.tree_*)
  int32_t tree_depth = 0;
  // --draft-model: a model of the same tokenizer drafts (vegas_session_options
  // .draft_model); the command loads it into draft_model, which it keeps alive.
  std::string draft_model_dir;
  const vegas_model *draft_model = nullptr;
  int32_t draft_window = 0;
};
// Parses "policy" or "policy:window_share" (e.g. "vegas:0.25") into the label,
// policy and window share of `base` (the rest is kept). Fails with a message.
SpecSettings parse_policy_spec(const std::string &spec, const SpecSettings &base,
                               const char *command);
// The canonical label of a policy and window share: "vegas:0.25".
std::string policy_label(const std::string &policy, float window_share);
// `base` with the draft model `draft` drafting every round, labelled "model"
// (the candidate of vegas tune and the series of vegas bench --report).
SpecSettings draft_model_spec(const SpecSettings &base, const vegas_model *draft);

// What every measured run shares: the model, where prompts come from, the
// sampling, the length of each generation and the speculative settings that
// a sweep does not vary.
struct RunArgs {
  ModelArgs model;
  std::string prompts_file;  // JSONL (field `text`); empty: random ids
  SamplingArgs sampling;
  int32_t new_tokens = 32;
  SpecSettings spec;
  std::string kv_type = "default";  // --kv-type: default or fp8 (vegas_kv_type)
};

// Prompts of any length and batch for one loaded model: from the prompts file
// (tokenized once) or random ids.
class PromptSource {
 public:
  PromptSource(const RunArgs &args, const LoadedModel &model, const char *command);
  Prompts get(int32_t context, int32_t batch) const;
  // The longest prompt available (of the file; unbounded for random ids: -1).
  int64_t longest() const;

 private:
  Prompts all_;
  bool random_ = true;
  uint64_t seed_ = 1;
  int32_t vocab_ = 0;
};

// Fails with a message naming the option unless every context is positive and
// leaves room in the model's context for `new_tokens` plus a round of
// `max_gamma` drafts.
void check_contexts(const std::vector<int32_t> &contexts, int32_t new_tokens, int32_t max_gamma,
                    const vegas_model_info &info, const char *command, const char *option);

// Session options for decoding `prompts` together (vanilla mode) with room in
// the KV pool for `new_tokens` each plus a round of up to `max_gamma` drafts,
// in a KV cache of `kv_type` (--kv-type).
vegas_session_options session_options(const vegas_model_info &info, const Prompts &prompts,
                                      int32_t new_tokens, int32_t max_gamma,
                                      const std::string &kv_type);
// `base` switched to VEGAS mode with `spec`; the policy string stays owned by `spec`.
vegas_session_options speculative_options(const vegas_session_options &base,
                                          const SpecSettings &spec);

// One generation over `prompts` in a fresh session: the prefill (until every
// sequence has its first token) and the decode that follows.
struct Measured {
  double prefill_s = 0.0;
  double decode_s = 0.0;
  double median_step_s = 0.0;
  // A step's seconds per token of each active sequence: a vanilla step's time,
  // also where the session runs several steps at once (vanilla_chain).
  double median_token_step_s = 0.0;
  int64_t decode_steps = 0;
  int64_t decode_tokens = 0;  // tokens committed after each sequence's first
  // Steady state: tokens per second over the decode steps after the first
  // kWarmupSteps (graph capture, GEMM plans and buffer growth happen there;
  // a speculative run has several step shapes and far fewer steps to amortise
  // them). 0 when the run had too few steps.
  double steady_tokens_per_s = 0.0;
  // Tokens per second over the steps after the warm-up in which every
  // sequence took part (none had finished, none finished in it): the whole
  // batch's rate. A speculative run lasts until its slowest sequence is done,
  // so its tail runs rounds of few sequences at nearly a full round's cost,
  // and which sequence is slowest changes with the sampled path: this figure
  // leaves that tail out (A/Bs of a few percent, README session 29). 0 when
  // no such step.
  double full_batch_tokens_per_s = 0.0;
  // The other decode steps (some sequence finished before or in the step,
  // warm-up included): their seconds and tokens. A speculative run's tail.
  double tail_s = 0.0;
  int64_t tail_tokens = 0;
  vegas_session_stats stats{};  // of the timed requests (the warm-up's taken off)
  // The warm-up requests (measure's warmup_tokens): their wall time, prefill
  // included, and the tokens they generated. A session's first steps of each
  // shape pay one-time costs (CUDA graph capture, buffers, a first lookup
  // index): these are what a new session pays before its timed figures.
  double warmup_s = 0.0;
  int64_t warmup_tokens = 0;
  Prompts tokens;  // per sequence
  // With logprobs_seq: that sequence's token log-probabilities (top 2).
  std::vector<vegas_token_logprobs> logprobs;

  // decode_tokens / decode_s.
  double mean_tokens_per_s() const;
  // The figure sweeps compare: steady-state tokens/s, or the mean over every
  // decode step when the run was too short for a steady state (see steady()).
  double tokens_per_s() const;
  bool steady() const { return steady_tokens_per_s > 0.0; }
};
// `logprobs_seq` >= 0: that sequence also records its logprobs (whole logit
// rows to the host for it: not a run to time). `warmup_tokens` > 0: the same
// session first runs the prompts for that many tokens each, untimed, and
// releases them, so that the timed requests meet a session that has served
// before (as an embedder's long-lived session does); the prefix cache is off
// so that the timed requests prefill in full.
Measured measure(vegas_model *model, const vegas_session_options &so, const SamplingArgs &sampling,
                 int32_t new_tokens, const Prompts &prompts, int32_t logprobs_seq = -1,
                 int32_t warmup_tokens = 0);

// τ, acceptance by draft position and the draft/verify/select time shares.
nlohmann::json speculative_json(const Measured &m);
// Acceptance probability of each draft position (accepted / drafted there).
std::vector<double> acceptance_by_position(const vegas_session_stats &s);

// A float setting (ratio, window share) as the decimal it was written as:
// 0.07f is 0.0700000003 as a double.
double tidy(float x);
std::vector<double> tidy(const std::vector<float> &xs);  // each of them

// Seconds on a monotonic clock.
double now_s();

}  // namespace vegas_cli
