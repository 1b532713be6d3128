// `vegas bench`: decode and prefill throughput against the memory-bandwidth
// floor (DESIGN §7), one JSON object out. With --mode vegas it runs vanilla and
// speculative decoding on the same prompts and seeds in the same process and
// adds τ, acceptance by draft position, the draft/verify/select time shares and
// the speed-up (decode tokens/s, each sequence's first token excluded).
//
// With --report DIR it runs the sweeps of bench_report.h instead and plots them.
#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_measure.h"
#include "bench_replay.h"
#include "bench_report.h"
#include "cli_util.h"
#include "commands.h"
#include "run_options.h"

namespace vegas_cli {

namespace {

// Where greedy Vegas first left vanilla's tokens: the first sequence that
// differs, the index among its generated tokens and both tokens there (a
// token missing at the end is -1); null when every sequence is identical.
nlohmann::json first_difference(const Prompts &vanilla, const Prompts &vegas) {
  const size_t n = std::max(vanilla.size(), vegas.size());
  for (size_t s = 0; s < n; ++s) {
    const std::vector<int32_t> none;
    const std::vector<int32_t> &a = s < vanilla.size() ? vanilla[s] : none;
    const std::vector<int32_t> &b = s < vegas.size() ? vegas[s] : none;
    if (a == b) continue;
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    nlohmann::json d;
    d["sequence"] = s;
    d["position"] = k;
    d["vanilla_token"] = k < a.size() ? a[k] : -1;
    d["vegas_token"] = k < b.size() ? b[k] : -1;
    int64_t identical = 0;
    for (size_t t = 0; t < n; ++t)
      identical += t < vanilla.size() && t < vegas.size() && vanilla[t] == vegas[t];
    d["sequences_identical"] = identical;
    d["sequences"] = n;
    return d;
  }
  return nullptr;
}

// The logit margin at a difference, from a rerun of the same batch whose
// differing sequence records logprobs: the log-probability gap between its two
// most probable tokens there (= their logit gap), in each mode, and whether
// the rerun reproduced the timed run's tokens up to and at that position. A
// near tie (a gap of a few bf16 ulps) is rounding, not a lossless bug.
void add_margins(nlohmann::json *difference, const Measured &vanilla, const Measured &vanilla_rerun,
                 const Measured &vegas, const Measured &vegas_rerun) {
  const size_t s = (*difference)["sequence"].get<size_t>();
  const size_t k = (*difference)["position"].get<size_t>();
  auto margin = [&](const Measured &rerun, const Measured &timed, const char *mode) {
    const std::string name(mode);
    const bool reproduced =
        s < rerun.tokens.size() && s < timed.tokens.size() && k < rerun.logprobs.size() &&
        k < timed.tokens[s].size() &&
        std::equal(timed.tokens[s].begin(), timed.tokens[s].begin() + static_cast<long>(k) + 1,
                   rerun.tokens[s].begin());
    (*difference)[name + "_rerun_reproduced"] = reproduced;
    if (k >= rerun.logprobs.size() || rerun.logprobs[k].n_top < 2) return;
    const vegas_token_logprobs &lp = rerun.logprobs[k];
    (*difference)[name + "_top2"] = {lp.top_ids[0], lp.top_ids[1]};
    (*difference)[name + "_margin"] = lp.top_logprobs[0] - lp.top_logprobs[1];
  };
  margin(vanilla_rerun, vanilla, "vanilla");
  margin(vegas_rerun, vegas, "vegas");
}

// --seeds N: vanilla and Vegas again for seeds seed + 1 .. seed + N - 1 (one
// seed's speed-up is one sample of a spread about +-10% wide at 16
// sequences, README): each seed's speed-up and τ, and their mean, min, max.
nlohmann::json seed_spread(vegas_model *model, const vegas_session_options &so,
                           const vegas_session_options &vso, const RunArgs &r,
                           const Prompts &prompts, int32_t n_seeds, int32_t warmup_tokens,
                           double first_speedup, double first_tau) {
  std::vector<double> speedups = {first_speedup}, taus = {first_tau};
  std::vector<uint64_t> seeds = {r.sampling.seed};
  for (int32_t k = 1; k < n_seeds; ++k) {
    SamplingArgs sampling = r.sampling;
    sampling.seed = r.sampling.seed + static_cast<uint64_t>(k);
    const Measured vanilla = measure(model, so, sampling, r.new_tokens, prompts, -1, warmup_tokens);
    const Measured vegas = measure(model, vso, sampling, r.new_tokens, prompts, -1, warmup_tokens);
    const double base = vanilla.mean_tokens_per_s();
    speedups.push_back(base > 0 ? vegas.mean_tokens_per_s() / base : 0.0);
    taus.push_back(speculative_json(vegas).value("tau", 0.0));
    seeds.push_back(sampling.seed);
  }
  auto mean = [](const std::vector<double> &v) {
    double t = 0;
    for (double x : v) t += x;
    return t / static_cast<double>(v.size());
  };
  nlohmann::json j;
  j["seeds"] = seeds;
  j["speedup"] = speedups;
  j["tau"] = taus;
  j["speedup_mean"] = mean(speedups);
  j["speedup_min"] = *std::min_element(speedups.begin(), speedups.end());
  j["speedup_max"] = *std::max_element(speedups.begin(), speedups.end());
  j["tau_mean"] = mean(taus);
  return j;
}

struct BenchArgs {
  RunArgs run;  // --policy, --gamma, --ratio, ... are run.spec (--mode vegas)
  std::string mode = "vanilla";
  int32_t context = 2048;
  int32_t batch = 1;
  bool baseline = true;  // --mode vegas: also run vanilla on the same prompts, for the speed-up
  int32_t seeds = 1;     // --seeds N: repeat both runs with seeds seed .. seed + N - 1
  // --warmup-tokens N: each mode's session first runs the prompts for N tokens
  // a sequence, untimed (measure()): the process's first kernel launches and
  // lazily loaded modules, and the session's graph captures and first lookup
  // indexes, would otherwise land in the timed runs. 32 lets auto mode try
  // each kind of step at 8K x 16 before the timed requests.
  int32_t warmup_tokens = 32;
  ReportArgs report;  // --report DIR
  ReplayArgs replay;  // --edit-replay N
};

// The shares of a run's decode seconds and tokens in its tail
// (Measured::tail_s): where a speculative run's whole-run rate falls below
// its full-batch rate.
void add_tail_shares(const Measured &m, nlohmann::json &j) {
  j["tail_time_share"] = m.decode_s > 0 ? m.tail_s / m.decode_s : 0.0;
  j["tail_token_share"] =
      m.decode_tokens > 0 ? static_cast<double>(m.tail_tokens) / m.decode_tokens : 0.0;
}

// Refuses flag combinations a bench run cannot honour (exit status 2).
void check_bench_args(const BenchArgs &a) {
  if (!a.run.model.synthetic.empty() && !a.run.prompts_file.empty()) {
    std::fprintf(stderr, "vegas bench: --synthetic has no tokenizer, so no --prompts\n");
    throw CLI::RuntimeError(2);
  }
  if (a.mode != "vegas" && a.mode != "auto" && a.mode != "vanilla") {
    std::fprintf(stderr, "vegas bench: unknown --mode %s (vanilla, vegas or auto)\n",
                 a.mode.c_str());
    throw CLI::RuntimeError(2);
  }
}

// --edit-replay: an editing session on the first prompt, as one JSON line.
void run_replay(const BenchArgs &a, const RunArgs &r, const LoadedModel &loaded,
                const std::vector<std::vector<int32_t>> &prompts) {
  const vegas_model_info &info = loaded.info;
  const vegas_session_options base = session_options(
      info, {prompts.at(0)}, r.new_tokens, r.spec.gamma > 0 ? r.spec.gamma : 6, r.kv_type);
  vegas_session_options so = base;
  if (a.mode != "vanilla") so = speculative_options(base, r.spec);
  if (a.mode == "auto") so.mode = VEGAS_MODE_AUTO;
  nlohmann::json j =
      edit_replay(loaded.model.get(), info, so, prompts.at(0), r.sampling, r.new_tokens, a.replay);
  j["model"] = info.architecture;
  j["synthetic"] = !r.model.synthetic.empty();
  j["backend"] = backend_name(info.backend);
  j["mode"] = a.mode;
  j["device"] = loaded.device;
  std::printf("%s\n", j.dump().c_str());
}

// Prefill work: 2 FLOPs per weight and token plus causal attention, 2 * 2 *
// q_dim FLOPs per (query, key) pair per layer, over each prompt. The embedding
// and the LM head (run on logit rows only) are not per-token GEMMs; info
// cannot tell a tied head, so 2 * vocab * hidden is left out: exact for untied
// models (Qwen3-8B), a lower bound for tied ones.
double prefill_flops(const vegas_model_info &info,
                     const std::vector<std::vector<int32_t>> &prompts) {
  double attn_pairs = 0.0, tokens = 0.0;
  for (const auto &p : prompts) {
    attn_pairs += 0.5 * static_cast<double>(p.size()) * static_cast<double>(p.size() + 1);
    tokens += static_cast<double>(p.size());
  }
  const double q_dim = static_cast<double>(info.n_heads) * info.head_dim;
  const double gemm_params = static_cast<double>(info.n_params) -
                             2.0 * static_cast<double>(info.vocab_size) * info.hidden_size;
  return 2.0 * std::max(gemm_params, 0.0) * tokens + 4.0 * q_dim * info.n_layers * attn_pairs;
}

// The "vegas" object of a speculative run; with the vanilla run beside it,
// the speed-ups and, greedy, where the two first differ (re-run for margins).
nlohmann::json vegas_section(const BenchArgs &a, const RunArgs &r, vegas_model *model,
                             const vegas_session_options &so, const vegas_session_options &vso,
                             const std::vector<std::vector<int32_t>> &prompts,
                             const Measured &vanilla, const Measured &vegas, bool with_vanilla) {
  const SpecSettings &spec = r.spec;
  nlohmann::json v = speculative_json(vegas);
  v["policy"] = spec.policy;
  v["gamma"] = spec.gamma;
  v["ratio"] = spec.ratio;
  v["min_tokens"] = spec.min_tokens;
  v["window_share"] = spec.window_share;
  v["sink"] = spec.sink;
  v["score_kind"] = spec.score_kind;
  v["tree_branches"] = spec.tree_branches;
  v["tree_depth"] = spec.tree_depth;
  v["draft_model"] = spec.draft_model_dir;
  v["draft_window"] = spec.draft_window;
  const double vegas_tps = vegas.mean_tokens_per_s();
  v["decode_tokens_per_s"] = vegas_tps;
  v["decode_tokens_per_s_steady"] = vegas.steady_tokens_per_s;
  if (with_vanilla && vanilla.steady_tokens_per_s > 0)
    v["speedup_steady"] = vegas.steady_tokens_per_s / vanilla.steady_tokens_per_s;
  v["decode_tokens_per_s_full_batch"] = vegas.full_batch_tokens_per_s;
  add_tail_shares(vegas, v);
  if (with_vanilla && vanilla.full_batch_tokens_per_s > 0 && vegas.full_batch_tokens_per_s > 0)
    v["speedup_full_batch"] = vegas.full_batch_tokens_per_s / vanilla.full_batch_tokens_per_s;
  v["prefill_seconds"] = vegas.prefill_s;
  v["warmup_seconds"] = vegas.warmup_s;
  if (!with_vanilla) return v;
  const double vanilla_tps = vanilla.mean_tokens_per_s();
  v["speedup"] = vanilla_tps > 0 ? vegas_tps / vanilla_tps : 0.0;
  // Greedy speculative decoding must reproduce vanilla exactly.
  if (r.sampling.temperature <= 0.0f) {
    v["identical_to_vanilla"] = vegas.tokens == vanilla.tokens;
    nlohmann::json difference = first_difference(vanilla.tokens, vegas.tokens);
    if (!difference.is_null()) {
      const int32_t seq = difference["sequence"].get<int32_t>();
      const Measured vanilla_rerun = measure(model, so, r.sampling, r.new_tokens, prompts, seq);
      const Measured vegas_rerun = measure(model, vso, r.sampling, r.new_tokens, prompts, seq);
      add_margins(&difference, vanilla, vanilla_rerun, vegas, vegas_rerun);
    }
    v["first_difference"] = difference;
  }
  if (a.seeds > 1 && r.sampling.temperature > 0.0f)
    v["over_seeds"] = seed_spread(model, so, vso, r, prompts, a.seeds, a.warmup_tokens,
                                  v["speedup"].get<double>(), v.value("tau", 0.0));
  return v;
}

// The bytes a decode step must read (the weights, and the KV of every
// sequence at its mean context over the run), and the time they take at the
// bandwidth of the memory the weights live in (device memory on CUDA),
// measured in this run.
struct StepFloor {
  double bytes = 0.0, bandwidth = 0.0, seconds = 0.0;
};
StepFloor step_floor(vegas_model *model, const vegas_model_info &info, int64_t prompt_tokens,
                     size_t n_prompts, int32_t new_tokens) {
  const double avg_context =
      static_cast<double>(prompt_tokens) / std::max<size_t>(n_prompts, 1) + new_tokens / 2.0;
  StepFloor f;
  f.bytes =
      static_cast<double>(info.weight_bytes) +
      avg_context * static_cast<double>(n_prompts) * static_cast<double>(info.kv_bytes_per_token);
  check(vegas_model_measure_bandwidth(model, &f.bandwidth), "vegas_model_measure_bandwidth");
  // The copy's read + written bytes per second is the memory's traffic rate, the
  // rate a read-only stream reaches too (H100: ~3000 GB/s both ways), so the
  // floor is the bytes a step reads at that rate (as bench_cuda_decode).
  f.seconds = f.bytes / f.bandwidth;
  return f;
}

void run_bench(const BenchArgs &a) {
  check_bench_args(a);
  RunArgs r = a.run;  // with the draft model it loads
  // --mode auto: VEGAS_MODE_AUTO, with the speculative settings of --mode vegas.
  const bool vegas_mode = a.mode == "vegas" || a.mode == "auto";
  const LoadedModel loaded = load_model(r.model);
  vegas_model *model = loaded.model.get();
  LoadedModel draft;  // --draft-model, on the model's backend
  if (!r.spec.draft_model_dir.empty()) {
    draft = load_draft_model(r.model, r.spec.draft_model_dir);
    r.spec.draft_model = draft.model.get();
  }
  const vegas_model_info &info = loaded.info;
  const auto prompts = PromptSource(r, loaded, "vegas bench").get(a.context, a.batch);
  if (a.replay.requests > 0) {
    run_replay(a, r, loaded, prompts);
    return;
  }
  int64_t total_prompt = 0;
  for (const auto &p : prompts) total_prompt += static_cast<int64_t>(p.size());
  // γ auto (0) may grow a sequence's drafts up to VEGAS_MAX_GAMMA.
  const vegas_session_options so = session_options(
      info, prompts, r.new_tokens, r.spec.gamma > 0 ? r.spec.gamma : VEGAS_MAX_GAMMA, r.kv_type);
  vegas_session_options vso = speculative_options(so, r.spec);
  if (a.mode == "auto") vso.mode = VEGAS_MODE_AUTO;

  const bool with_vanilla = !vegas_mode || a.baseline;
  Measured vanilla;
  if (with_vanilla)
    vanilla = measure(model, so, r.sampling, r.new_tokens, prompts, -1, a.warmup_tokens);
  Measured vegas;
  if (vegas_mode)
    vegas = measure(model, vso, r.sampling, r.new_tokens, prompts, -1, a.warmup_tokens);
  const Measured &main_run = vegas_mode ? vegas : vanilla;

  const StepFloor floor = step_floor(model, info, total_prompt, prompts.size(), r.new_tokens);
  nlohmann::json j;
  j["model"] = info.architecture;
  j["synthetic"] = !r.model.synthetic.empty();
  j["backend"] = backend_name(info.backend);
  j["mode"] = a.mode;
  j["context"] = a.context;
  j["batch"] = static_cast<int32_t>(prompts.size());
  j["new_tokens"] = r.new_tokens;
  j["warmup_tokens"] = a.warmup_tokens;
  if (with_vanilla) j["warmup_seconds"] = vanilla.warmup_s;
  j["prompt_tokens"] = total_prompt;
  j["temperature"] = r.sampling.temperature;
  j["top_k"] = r.sampling.top_k;
  j["top_p"] = r.sampling.top_p;
  j["prefill_seconds"] = main_run.prefill_s;
  j["prefill_tokens_per_s"] = main_run.prefill_s > 0 ? total_prompt / main_run.prefill_s : 0.0;
  const double flops = prefill_flops(info, prompts);
  j["prefill_flops"] = flops;
  j["prefill_tflops_per_s"] = main_run.prefill_s > 0 ? flops / main_run.prefill_s / 1e12 : 0.0;
  j["decode_steps"] = main_run.decode_steps;
  j["median_step_ms"] = (vegas_mode ? main_run.median_step_s : main_run.median_token_step_s) * 1e3;
  j["bytes_per_step"] = floor.bytes;
  j["copy_bandwidth_GBps"] = floor.bandwidth / 1e9;
  j["floor_step_ms"] = floor.seconds * 1e3;
  if (with_vanilla) {
    // Vanilla commits one token per sequence and step (a chain: one per step in it).
    const double step_s = vanilla.median_token_step_s;
    j["decode_tokens_per_s"] = step_s > 0 ? static_cast<double>(prompts.size()) / step_s : 0.0;
    j["decode_tokens_per_s_mean"] = vanilla.mean_tokens_per_s();
    j["decode_tokens_per_s_steady"] = vanilla.steady_tokens_per_s;
    j["decode_tokens_per_s_full_batch"] = vanilla.full_batch_tokens_per_s;
    add_tail_shares(vanilla, j);
    j["fraction_of_floor"] = step_s > 0 ? floor.seconds / step_s : 0.0;
  }
  if (vegas_mode)
    j["vegas"] = vegas_section(a, r, model, so, vso, prompts, vanilla, vegas, with_vanilla);
  std::printf("%s\n", j.dump().c_str());
}

// Options of a single run that --report does not take, and the reverse.
constexpr std::array<const char *, 6> kSingleRunOptions = {
    "--context", "--mode", "--no-baseline", "--policy", "--window-share", "--seeds"};
constexpr std::array<const char *, 11> kReportOptions = {
    "--contexts", "--policies", "--ratios",  "--gammas",      "--sweep-context", "--heatmap-policy",
    "--quick",    "--plot",     "--no-plot", "--plot-script", "--python"};

}  // namespace

void add_bench_command(CLI::App &app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App *cmd = app.add_subcommand("bench", "Measure prefill and decode throughput (JSON out)");
  add_run_options(cmd, args->run);
  cmd->add_option("--mode", args->mode,
                  "vanilla, vegas, or auto (Vegas rounds while they pay, else vanilla steps)");
  cmd->add_option("--context", args->context, "Prompt tokens per sequence")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--batch", args->batch, "Sequences decoded together")->check(CLI::PositiveNumber);
  cmd->add_option("--policy", args->run.spec.policy, "Selection policy for --mode vegas");
  cmd->add_option("--gamma", args->run.spec.gamma, "Draft length for --mode vegas (0 = auto)")
      ->check(CLI::Range(0, VEGAS_MAX_GAMMA));
  cmd->add_option("--ratio", args->run.spec.ratio,
                  "Selected share of the KV for --mode vegas (0 = auto)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--window-share", args->run.spec.window_share,
                  "Share of the budget kept for recent tokens")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seeds", args->seeds,
                  "With --mode vegas and sampling: repeat vanilla and Vegas with seeds seed .. "
                  "seed + N - 1 and add each speed-up and τ, and their mean (vegas.over_seeds)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--warmup-tokens", args->warmup_tokens,
                  "Each mode's session first runs the prompts for N tokens a sequence, untimed "
                  "(graph captures and first-use costs; 0 = none, a cold session)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("!--no-baseline", args->baseline,
                "With --mode vegas, skip the vanilla run (no speed-up reported)");
  cmd->add_option("--edit-replay", args->replay.requests,
                  "Replay an editing session instead: N requests of the first prompt, each with "
                  "its last --edited tokens changed, prefix cache on and off (time to first "
                  "token)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--edited", args->replay.edited, "Tokens changed per --edit-replay request")
      ->check(CLI::Range(1, 4096));
  add_report_options(cmd, args->report);
  cmd->callback([args, cmd]() {
    args->run.model.seed = args->run.sampling.seed;
    const bool report = !args->report.dir.empty();
    auto refuse = [&](const char *name, const char *why) {
      if (!cmd->count(name)) return;
      std::fprintf(stderr, "vegas bench: %s %s\n", name, why);
      throw CLI::RuntimeError(2);
    };
    if (report)
      for (const char *name : kSingleRunOptions)
        refuse(name, "is for a single run: --report sweeps --contexts and --policies");
    else
      for (const char *name : kReportOptions) refuse(name, "needs --report DIR");
    if (report)
      run_report(args->run, args->batch, args->report, *cmd);
    else
      run_bench(*args);
  });
}

}  // namespace vegas_cli
