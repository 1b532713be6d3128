// `vegas tune`: measures the speculative settings of a model per bucket of
// context length and batch size (the three steps of tune_search.h for every
// candidate policy and window share) and writes the best of each bucket as a
// profile (format "vegas-profile/1", tune_profile.h) that sessions in auto
// mode start from. Progress goes to stderr, the whole sweep as JSON to stdout
// (or --sweep-json). With --draft-model the draft model drafting every round
// is one more candidate ("model", γ only: it selects nothing); a bucket's
// setting stays the best of the model's own drafting, and the draft model's
// best γ goes beside it ("draft_model"), where sessions with that draft start.
// The model is loaded once; the C API has no way to share a prefill between
// sessions, so every measured point prefills its prompts anew.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_measure.h"
#include "cli_util.h"
#include "commands.h"
#include "output_files.h"
#include "run_options.h"
#include "tune_profile.h"
#include "tune_search.h"

namespace vegas_cli {

namespace {

constexpr const char *kCommand = "vegas tune";

struct TuneArgs {
  RunArgs run;
  std::vector<int32_t> contexts;  // empty: one per context bucket that the prompts reach
  std::vector<int32_t> batches;
  std::vector<std::string> candidates;
  TuneGrid grid;
  std::vector<int64_t> context_edges{4096, 8192, 16384};
  std::vector<int64_t> batch_edges{4, 16};
  std::string out;         // empty: <model dir>/vegas-profile.json
  std::string sweep_json;  // empty: stdout
  bool quick = false;
  bool replace = false;  // --replace: may overwrite the model directory's profile
};

[[noreturn]] void usage_error(const std::string &message) {
  std::fprintf(stderr, "%s: %s\n", kCommand, message.c_str());
  throw CLI::RuntimeError(2);
}

// Defaults for the options not given; --quick makes them tiny.
void apply_defaults(TuneArgs &a, const CLI::App &cmd) {
  const bool q = a.quick;
  if (a.batches.empty()) a.batches = q ? std::vector<int32_t>{1} : std::vector<int32_t>{1, 16};
  if (a.candidates.empty())
    a.candidates =
        q ? std::vector<std::string>{"vegas:0.5", "streaming"}
          : std::vector<std::string>{"vegas:0",   "vegas:0.25", "vegas:0.5", "vegas:0.75",
                                     "streaming", "vegas-all",  "lookup",    "vegas+lookup:0.5"};
  if (a.grid.ratios.empty())
    a.grid.ratios = q ? std::vector<float>{0.1f, 0.3f}
                      : std::vector<float>{0.02f, 0.03f, 0.05f, 0.07f, 0.1f, 0.15f, 0.2f, 0.3f};
  if (a.grid.gammas.empty())
    a.grid.gammas =
        q ? std::vector<int32_t>{2, 4} : std::vector<int32_t>{2, 3, 4, 5, 6, 7, 8, 10, 12};
  if (q && !cmd.count("--large-gamma")) a.grid.large_gamma = 4;
  if (!cmd.count("--new-tokens")) a.run.new_tokens = q ? 8 : 128;
  // The quick sweep's short contexts would select everything under the default floor of 256.
  if (q && !cmd.count("--min-tokens")) a.run.spec.min_tokens = 16;
  if (q && a.contexts.empty()) a.contexts = {256};
}

void check_args(TuneArgs &a) {
  auto &ratios = a.grid.ratios;
  for (float r : ratios)
    if (!(r > 0.0f && r <= 1.0f)) usage_error("--ratios " + std::to_string(r) + ": not in (0, 1]");
  std::sort(ratios.begin(), ratios.end());
  ratios.erase(std::unique(ratios.begin(), ratios.end()), ratios.end());
  for (int32_t g : a.grid.gammas)
    if (g < 1 || g > VEGAS_MAX_GAMMA)
      usage_error("--gammas " + std::to_string(g) + ": not in [1, 32]");
  for (int32_t b : a.batches)
    if (b < 1) usage_error("--batches " + std::to_string(b) + ": a batch must be positive");
  if (ratios.empty() || a.grid.gammas.empty() || a.batches.empty() || a.candidates.empty())
    usage_error("--ratios, --gammas, --batches and --candidates need at least one value");
  for (const auto *edges : {&a.context_edges, &a.batch_edges})
    for (size_t i = 0; i < edges->size(); ++i)
      if ((*edges)[i] <= 0 || (i > 0 && (*edges)[i] <= (*edges)[i - 1]))
        usage_error("bucket edges must be positive and ascending");
}

std::string range_text(const Range &r, bool inclusive) {
  const std::string max = r.max < 0 ? "inf" : std::to_string(r.max);
  return "[" + std::to_string(r.min) + ", " + max + (inclusive ? "]" : ")");
}

// A (context, batch) the sweep measures, with the bucket it falls in.
struct Job {
  int32_t context = 0;
  Prompts prompts;
  size_t context_range = 0;
  size_t batch_range = 0;
  double mean_context = 0.0;  // prompt + half the generated tokens
};

std::vector<Job> plan_jobs(TuneArgs &a, const PromptSource &source, const vegas_model_info &info,
                           const std::vector<Range> &ctx_ranges,
                           const std::vector<Range> &batch_ranges, int32_t max_gamma) {
  const bool default_contexts = a.contexts.empty();
  if (default_contexts) {
    const int64_t room =
        info.max_context > 0 ? info.max_context - a.run.new_tokens - max_gamma : -1;
    for (const Range &r : ctx_ranges) {
      int64_t c = representative(r);
      if (source.longest() > 0) c = std::min(c, source.longest());
      if (room > 0) c = std::min(c, room);
      if (c > 0 && std::find(a.contexts.begin(), a.contexts.end(), c) == a.contexts.end())
        a.contexts.push_back(static_cast<int32_t>(c));
    }
  }
  check_contexts(a.contexts, a.run.new_tokens, max_gamma, info, kCommand, "--contexts");
  std::vector<Job> jobs;
  std::map<std::pair<size_t, size_t>, int32_t> taken;  // bucket -> context measured there
  for (int32_t b : a.batches) {
    for (int32_t c : a.contexts) {
      Job j;
      j.context = c;
      j.prompts = source.get(c, b);
      j.mean_context = mean_length(j.prompts) + a.run.new_tokens / 2.0;
      j.context_range = range_of(ctx_ranges, static_cast<int64_t>(j.mean_context), false);
      j.batch_range = range_of(batch_ranges, static_cast<int64_t>(j.prompts.size()), true);
      const auto key = std::make_pair(j.context_range, j.batch_range);
      const auto it = taken.find(key);
      if (it != taken.end()) {
        // Contexts are bucketed by their mean length with the generated tokens.
        const std::string what = "context " + std::to_string(c) + " at batch " + std::to_string(b) +
                                 " (mean " + std::to_string(static_cast<int64_t>(j.mean_context)) +
                                 " with the generated tokens) falls in the bucket of context " +
                                 std::to_string(it->second) + ": context " +
                                 range_text(ctx_ranges[j.context_range], false) + ", batch " +
                                 range_text(batch_ranges[j.batch_range], true);
        if (!default_contexts) usage_error(what + " (one context per bucket; see --context-edges)");
        std::fprintf(stderr, "[tune] skipping %s\n", what.c_str());
        continue;
      }
      taken.emplace(key, c);
      jobs.push_back(std::move(j));
    }
  }
  std::sort(jobs.begin(), jobs.end(), [](const Job &x, const Job &y) {
    return std::make_pair(x.context_range, x.batch_range) <
           std::make_pair(y.context_range, y.batch_range);
  });
  return jobs;
}

// --out, or the model directory's vegas-profile.json (kept unless --replace:
// it may be the one shipped with the model, from a long sweep elsewhere);
// both outputs checked writable before the sweep costs an hour.
void resolve_outputs(TuneArgs &a) {
  if (a.out.empty()) {
    if (!a.run.model.synthetic.empty())
      usage_error("a synthetic model has no directory: give --out for the profile");
    a.out = a.run.model.model_dir + "/vegas-profile.json";
    std::error_code ec;
    if (!a.replace && std::filesystem::exists(a.out, ec))
      usage_error(a.out + " exists: give --out for the new profile, or --replace to overwrite it");
  }
  check_writable_dir(parent_dir(a.out), kCommand, "the profile (--out)");
  if (!a.sweep_json.empty()) check_writable_dir(parent_dir(a.sweep_json), kCommand, "--sweep-json");
}

bool by_draft_model(const TunePoint &p) {
  return p.spec.draft_model != nullptr;
}

// One bucket's sweep: vanilla, then every candidate's points; its choice
// (the model's own drafting, what every session can use; the draft model's
// best beside it) and its entry of the sweep JSON.
TunedBucket tune_bucket(const TuneArgs &a, const LoadedModel &model, const Job &job,
                        const std::vector<SpecSettings> &candidates, const Range &context,
                        const Range &batch_range, int32_t max_gamma, nlohmann::json *sweep_bucket) {
  const vegas_session_options base =
      session_options(model.info, job.prompts, a.run.new_tokens, max_gamma, a.run.kv_type);
  const int32_t batch = static_cast<int32_t>(job.prompts.size());
  const Measured vanilla =
      measure(model.model.get(), base, a.run.sampling, a.run.new_tokens, job.prompts);
  std::fprintf(stderr, "[tune] context %d x %d vanilla: %.1f tok/s\n", job.context, batch,
               vanilla.tokens_per_s());
  BucketPoints points([&](const SpecSettings &spec) {
    const Measured m = measure(model.model.get(), speculative_options(base, spec), a.run.sampling,
                               a.run.new_tokens, job.prompts);
    TunePoint p;
    p.tau = m.stats.tokens_per_round;
    p.tokens_per_s = m.tokens_per_s();
    p.steady = m.steady();
    std::fprintf(stderr, "[tune] context %d x %d %s gamma %d ratio %g: tau %.2f, %.1f tok/s\n",
                 job.context, batch, spec.label.c_str(), spec.gamma,
                 static_cast<double>(spec.ratio), p.tau, p.tokens_per_s);
    return p;
  });
  nlohmann::json cands = nlohmann::json::array();
  for (const SpecSettings &c : candidates)
    cands.push_back(candidate_json(tune_candidate(c, a.grid, points)));
  TunedBucket t;
  t.context = context;
  t.batch = batch_range;
  t.vanilla_tokens_per_s = vanilla.tokens_per_s();
  t.choice = *points.best_of([](const TunePoint &p) { return !by_draft_model(p); });
  if (const TunePoint *d = points.best_of(by_draft_model)) t.draft_model = *d;
  std::fprintf(stderr, "[tune] bucket context %s batch %s: %s gamma %d ratio %g (%.2fx vanilla)\n",
               range_text(t.context, false).c_str(), range_text(t.batch, true).c_str(),
               t.choice.spec.label.c_str(), t.choice.spec.gamma,
               static_cast<double>(t.choice.spec.ratio), t.speedup_of(t.choice));
  nlohmann::json pts = nlohmann::json::array();
  for (const TunePoint &p : points.all()) pts.push_back(point_json(p));
  *sweep_bucket = {{"context", job.context},
                   {"mean_context", job.mean_context},
                   {"batch", batch},
                   {"context_min", t.context.min},
                   {"context_max", t.context.max},
                   {"batch_min", t.batch.min},
                   {"batch_max", t.batch.max},
                   {"vanilla_tokens_per_s", t.vanilla_tokens_per_s},
                   {"vanilla_steady", vanilla.steady()},
                   {"candidates", cands},
                   {"points", pts},
                   {"choice", point_json(t.choice)}};
  if (t.draft_model) {
    (*sweep_bucket)["draft_model_choice"] = point_json(*t.draft_model);
    std::fprintf(stderr, "[tune] bucket context %s batch %s: the draft model at gamma %d (%.2fx)\n",
                 range_text(t.context, false).c_str(), range_text(t.batch, true).c_str(),
                 t.draft_model->spec.gamma, t.speedup_of(*t.draft_model));
  }
  return t;
}

// The whole sweep (--sweep-json, or stdout): the run's settings and every bucket.
nlohmann::json sweep_json(const TuneArgs &a, const ProfileInfo &info, nlohmann::json buckets) {
  const std::vector<double> ratios = tidy(a.grid.ratios);
  return {{"format", "vegas-tune-sweep/1"},
          {"model", info.model},
          {"backend", info.backend},
          {"device", info.device},
          {"created_by", info.created_by},
          {"profile", a.out},
          {"new_tokens", a.run.new_tokens},
          {"temperature", a.run.sampling.temperature},
          {"top_k", a.run.sampling.top_k},
          {"top_p", a.run.sampling.top_p},
          {"min_tokens", a.run.spec.min_tokens},
          {"candidates", a.candidates},
          {"draft_model", a.run.spec.draft_model_dir},
          {"ratios", ratios},
          {"gammas", a.grid.gammas},
          {"large_gamma", a.grid.large_gamma},
          {"tau_tolerance", a.grid.tau_tolerance},
          {"buckets", std::move(buckets)}};
}

void run_tune(TuneArgs a, const CLI::App &cmd) {
  apply_defaults(a, cmd);
  check_args(a);
  std::vector<SpecSettings> candidates;
  for (const std::string &c : a.candidates)
    candidates.push_back(parse_policy_spec(c, a.run.spec, kCommand));
  resolve_outputs(a);

  const LoadedModel model = load_model(a.run.model);
  // --draft-model: one more candidate, "model", the draft model drafting every
  // round; the others draft with the model itself (their spec has no draft).
  LoadedModel draft;
  if (!a.run.spec.draft_model_dir.empty()) {
    draft = load_draft_model(a.run.model, a.run.spec.draft_model_dir);
    candidates.push_back(draft_model_spec(a.run.spec, draft.model.get()));
  }
  const PromptSource source(a.run, model, kCommand);
  const int32_t max_gamma =
      std::max(a.grid.large_gamma, *std::max_element(a.grid.gammas.begin(), a.grid.gammas.end()));
  const auto ctx_ranges = ranges_from_edges(a.context_edges, false);
  const auto batch_ranges = ranges_from_edges(a.batch_edges, true);
  const std::vector<Job> jobs =
      plan_jobs(a, source, model.info, ctx_ranges, batch_ranges, max_gamma);

  std::vector<TunedBucket> tuned;
  nlohmann::json sweep_buckets = nlohmann::json::array();
  for (const Job &job : jobs) {
    nlohmann::json bucket;
    tuned.push_back(tune_bucket(a, model, job, candidates, ctx_ranges[job.context_range],
                                batch_ranges[job.batch_range], max_gamma, &bucket));
    sweep_buckets.push_back(std::move(bucket));
  }

  ProfileInfo info{model.name, backend_name(model.info.backend), model.device, command_line()};
  write_file_atomically(a.out, profile_json(info, tuned).dump(2) + "\n", kCommand);
  std::fprintf(stderr, "[tune] wrote %s\n", a.out.c_str());
  const nlohmann::json sweep = sweep_json(a, info, std::move(sweep_buckets));
  if (a.sweep_json.empty())
    std::printf("%s\n", sweep.dump().c_str());
  else
    write_file_atomically(a.sweep_json, sweep.dump(2) + "\n", kCommand);
}

}  // namespace

void add_tune_command(CLI::App &app) {
  auto args = std::make_shared<TuneArgs>();
  CLI::App *cmd = app.add_subcommand(
      "tune", "Measure the best speculative settings per context and batch bucket (profile JSON)");
  add_run_options(cmd, args->run);
  cmd->add_option("--contexts", args->contexts,
                  "Prompt lengths to tune at, one per context bucket (default: each bucket's "
                  "middle, cut to the longest prompt)")
      ->delimiter(',');
  cmd->add_option("--batches", args->batches, "Batch sizes to tune at (default 1,16)")
      ->delimiter(',');
  cmd->add_option("--candidates", args->candidates,
                  "Policies, each \"policy\" or \"policy:window_share\" (default vegas:0,"
                  "vegas:0.25,vegas:0.5,vegas:0.75,streaming,vegas-all,lookup,vegas+lookup:0.5)")
      ->delimiter(',');
  cmd->add_option("--ratios", args->grid.ratios,
                  "Ratios of steps 1 and 3 (default 0.02,0.03,0.05,0.07,0.1,0.15,0.2,0.3)")
      ->delimiter(',');
  cmd->add_option("--gammas", args->grid.gammas, "Draft lengths of step 2 (default 2..8,10,12)")
      ->delimiter(',');
  cmd->add_option("--large-gamma", args->grid.large_gamma, "Draft length of step 1 (default 10)")
      ->check(CLI::Range(1, VEGAS_MAX_GAMMA));
  cmd->add_option("--tau-tolerance", args->grid.tau_tolerance,
                  "Step 1: the knee is the smallest ratio within this share of the best tau "
                  "(default 0.05)")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--context-edges", args->context_edges,
                  "Context bucket edges (default 4096,8192,16384)")
      ->delimiter(',');
  cmd->add_option("--batch-edges", args->batch_edges,
                  "Last batch of each batch bucket but the unbounded one (default 4,16)")
      ->delimiter(',');
  cmd->add_option("--out", args->out,
                  "Profile path (default <model dir>/vegas-profile.json, if there is none yet)");
  cmd->add_flag("--replace", args->replace,
                "Without --out: overwrite the model directory's existing profile");
  cmd->add_option("--sweep-json", args->sweep_json, "Write the whole sweep here, not to stdout");
  cmd->add_flag("--quick", args->quick,
                "A tiny sweep (seconds on a CPU; for tests): one context of 256, batch 1, two "
                "candidates, two ratios and two gammas unless given");
  cmd->callback([args, cmd]() {
    args->run.model.seed = args->run.sampling.seed;
    run_tune(*args, *cmd);
  });
}

}  // namespace vegas_cli
