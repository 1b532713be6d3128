#include "bench_report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "output_files.h"
#include "plot_script.h"

namespace vegas_cli {

namespace {

constexpr const char *kCommand = "vegas bench --report";

// What the plots need of one speculative run.
struct Point {
  double tau = 0.0;
  double tokens_per_s = 0.0;
  bool steady = false;
  std::vector<double> acceptance;
};

// Measures runs at one context, each speculative setting once: the τ-vs-ratio
// sweep and the heat map share points with the throughput runs.
class ContextRuns {
 public:
  ContextRuns(const LoadedModel &model, const RunArgs &run, Prompts prompts, int32_t max_gamma)
      : model_(model),
        run_(run),
        prompts_(std::move(prompts)),
        base_(session_options(model.info, prompts_, run.new_tokens, max_gamma, run.kv_type)) {}

  double mean_context() const { return mean_length(prompts_); }

  double vanilla() {
    if (vanilla_ < 0) {
      const Measured m =
          measure(model_.model.get(), base_, run_.sampling, run_.new_tokens, prompts_);
      vanilla_ = m.tokens_per_s();
      std::fprintf(stderr, "[report] context %.0f x %zu vanilla: %.1f tok/s\n", mean_context(),
                   prompts_.size(), vanilla_);
    }
    return vanilla_;
  }

  const Point &speculative(const SpecSettings &spec) {
    const auto key = std::make_tuple(spec.label, spec.gamma, spec.ratio);
    auto it = points_.find(key);
    if (it != points_.end()) return it->second;
    const Measured m = measure(model_.model.get(), speculative_options(base_, spec), run_.sampling,
                               run_.new_tokens, prompts_);
    Point p;
    p.tau = m.stats.tokens_per_round;
    p.tokens_per_s = m.tokens_per_s();
    p.steady = m.steady();
    p.acceptance = acceptance_by_position(m.stats);
    std::fprintf(stderr, "[report] context %.0f x %zu %s gamma %d ratio %g: tau %.2f, %.1f tok/s\n",
                 mean_context(), prompts_.size(), spec.label.c_str(), spec.gamma,
                 static_cast<double>(spec.ratio), p.tau, p.tokens_per_s);
    return points_.emplace(key, std::move(p)).first->second;
  }

 private:
  const LoadedModel &model_;
  const RunArgs &run_;
  Prompts prompts_;
  vegas_session_options base_;
  double vanilla_ = -1.0;
  std::map<std::tuple<std::string, int32_t, float>, Point> points_;
};

// The report's defaults, smaller under --quick; options given on the command
// line are kept.
void apply_defaults(RunArgs &run, int32_t &batch, ReportArgs &r, const CLI::App &cmd) {
  if (!cmd.count("--batch")) batch = r.quick ? 1 : 16;
  if (!cmd.count("--new-tokens")) run.new_tokens = r.quick ? 8 : 128;
  // At the quick sweep's short contexts the default floor of 256 would make
  // every ratio select everything.
  if (r.quick && !cmd.count("--min-tokens")) run.spec.min_tokens = 16;
  if (r.policies.empty()) {
    if (r.quick)
      r.policies = {"vegas:0.5", "streaming"};
    else
      r.policies = {"vegas:0.5", "vegas:0.25", "vegas:0", "streaming", "specextend", "vegas-all"};
  }
  if (r.ratios.empty())
    r.ratios = r.quick ? std::vector<float>{0.1f, 0.3f}
                       : std::vector<float>{0.02f, 0.05f, 0.07f, 0.1f, 0.15f, 0.2f, 0.3f};
  if (r.gammas.empty())
    r.gammas = r.quick ? std::vector<int32_t>{2, 4} : std::vector<int32_t>{2, 4, 6, 8, 10, 12};
}

// 2048, 8192 and 16384 (quick: 256 and 512), each cut to the longest prompt
// and to what the model's positions leave room for; duplicates dropped.
std::vector<int32_t> default_contexts(bool quick, int64_t longest, const vegas_model_info &info,
                                      int32_t room) {
  const std::vector<int32_t> wanted =
      quick ? std::vector<int32_t>{256, 512} : std::vector<int32_t>{2048, 8192, 16384};
  std::vector<int32_t> out;
  for (int32_t c : wanted) {
    int64_t v = c;
    if (longest > 0) v = std::min(v, longest);
    if (info.max_context > 0) v = std::min<int64_t>(v, info.max_context - room);
    if (v > 0 && std::find(out.begin(), out.end(), v) == out.end())
      out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

void check_lists(const ReportArgs &r) {
  for (float x : r.ratios)
    if (!(x > 0.0f && x <= 1.0f)) {
      std::fprintf(stderr, "%s: --ratios %g: a ratio must be in (0, 1]\n", kCommand,
                   static_cast<double>(x));
      throw CLI::RuntimeError(2);
    }
  for (int32_t g : r.gammas)
    if (g < 1 || g > VEGAS_MAX_GAMMA) {
      std::fprintf(stderr, "%s: --gammas %d: γ must be in [1, %d]\n", kCommand, g, VEGAS_MAX_GAMMA);
      throw CLI::RuntimeError(2);
    }
  if (r.ratios.empty() || r.gammas.empty() || r.policies.empty()) {
    std::fprintf(stderr, "%s: --ratios, --gammas and --policies need at least one value\n",
                 kCommand);
    throw CLI::RuntimeError(2);
  }
}

}  // namespace

void add_report_options(CLI::App *cmd, ReportArgs &r) {
  cmd->add_option("--report", r.dir,
                  "Run the report's sweeps; write DIR/report.json and plot it (PNG) into DIR");
  cmd->add_option("--contexts", r.contexts,
                  "--report: prompt lengths of the throughput sweep (default 2048,8192,16384 "
                  "cut to the prompts)")
      ->delimiter(',');
  cmd->add_option("--policies", r.policies,
                  "--report: policies, each \"policy\" or \"policy:window_share\" (default "
                  "vegas:0.5,vegas:0.25,vegas:0,streaming,specextend,vegas-all)")
      ->delimiter(',');
  cmd->add_option("--ratios", r.ratios,
                  "--report: ratios of the tau-vs-ratio sweep and the heat map "
                  "(default 0.02,0.05,0.07,0.1,0.15,0.2,0.3)")
      ->delimiter(',');
  cmd->add_option("--gammas", r.gammas, "--report: heat-map draft lengths (default 2,4,...,12)")
      ->delimiter(',');
  cmd->add_option("--sweep-context", r.sweep_context,
                  "--report: one of --contexts for acceptance, tau-vs-ratio and the heat map "
                  "(default: nearest 8192)");
  cmd->add_option("--heatmap-policy", r.heatmap_policy, "--report: policy of the heat map");
  cmd->add_flag("--quick", r.quick, "--report: a tiny sweep (seconds on a CPU; for tests)");
  cmd->add_flag("--plot", r.plot, "--report: fail unless the plots are made");
  cmd->add_flag("--no-plot", r.no_plot, "--report: write report.json only");
  cmd->add_option("--plot-script", r.plot_script,
                  "--report: tools/plot_bench.py (default: found from the executable or "
                  "$VEGAS_SOURCE_DIR)");
  cmd->add_option("--python", r.python, "--report: the Python that runs the plot script");
}

namespace {

// --contexts (default: the sweep's own, cut to the prompts and the model)
// and --sweep-context (default: the one nearest 8192), checked.
void resolve_contexts(ReportArgs &r, const RunArgs &run, const PromptSource &source,
                      const LoadedModel &model, int32_t max_gamma) {
  if (r.contexts.empty())
    r.contexts =
        default_contexts(r.quick, source.longest(), model.info, run.new_tokens + max_gamma);
  check_contexts(r.contexts, run.new_tokens, max_gamma, model.info, kCommand, "--contexts");
  if (r.sweep_context == 0) {
    r.sweep_context = *std::min_element(
        r.contexts.begin(), r.contexts.end(),
        [](int32_t a, int32_t b) { return std::abs(a - 8192) < std::abs(b - 8192); });
  } else if (std::find(r.contexts.begin(), r.contexts.end(), r.sweep_context) == r.contexts.end()) {
    std::fprintf(stderr, "%s: --sweep-context %d is not one of --contexts\n", kCommand,
                 r.sweep_context);
    throw CLI::RuntimeError(2);
  }
}

// The sweep context's acceptance by draft position, one series each.
nlohmann::json acceptance_json(ContextRuns &runs, const RunArgs &run,
                               const std::vector<SpecSettings> &series) {
  nlohmann::json j = {{"context", runs.mean_context()},
                      {"gamma", run.spec.gamma},
                      {"ratio", tidy(run.spec.ratio)},
                      {"series", nlohmann::json::array()}};
  for (const SpecSettings &s : series)
    j["series"].push_back(
        {{"label", s.label}, {"acceptance_by_position", runs.speculative(s).acceptance}});
  return j;
}

// τ and tokens/s of each policy at every --ratios value.
nlohmann::json tau_vs_ratio_json(ContextRuns &runs, const RunArgs &run, const ReportArgs &r,
                                 const std::vector<SpecSettings> &specs) {
  const std::vector<double> ratios = tidy(r.ratios);
  nlohmann::json j = {{"context", runs.mean_context()},
                      {"gamma", run.spec.gamma},
                      {"ratios", ratios},
                      {"series", nlohmann::json::array()}};
  for (const SpecSettings &s : specs) {
    nlohmann::json tau = nlohmann::json::array(), tps = nlohmann::json::array();
    for (float ratio : r.ratios) {
      SpecSettings at = s;
      at.ratio = ratio;
      const Point &p = runs.speculative(at);
      tau.push_back(p.tau);
      tps.push_back(p.tokens_per_s);
    }
    j["series"].push_back({{"label", s.label}, {"tau", tau}, {"tokens_per_s", tps}});
  }
  return j;
}

// The heat map: the --heatmap-policy's tokens/s and τ over --gammas x --ratios.
nlohmann::json heatmap_json(ContextRuns &runs, const ReportArgs &r, const SpecSettings &heat) {
  const std::vector<double> ratios = tidy(r.ratios);
  nlohmann::json grid = nlohmann::json::array(), tau_grid = nlohmann::json::array();
  for (int32_t g : r.gammas) {
    nlohmann::json row = nlohmann::json::array(), tau_row = nlohmann::json::array();
    for (float ratio : r.ratios) {
      SpecSettings at = heat;
      at.gamma = g;
      at.ratio = ratio;
      const Point &p = runs.speculative(at);
      row.push_back(p.tokens_per_s);
      tau_row.push_back(p.tau);
    }
    grid.push_back(row);
    tau_grid.push_back(tau_row);
  }
  return {{"context", runs.mean_context()},
          {"label", heat.label},
          {"gammas", r.gammas},
          {"ratios", ratios},
          {"tokens_per_s", grid},
          {"tau", tau_grid},
          {"vanilla_tokens_per_s", runs.vanilla()}};
}

// report.json's head: what was run, on what.
nlohmann::json report_head(const LoadedModel &model, const RunArgs &run, int32_t batch) {
  nlohmann::json j;
  j["format"] = "vegas-report/1";
  j["model"] = model.name;
  j["backend"] = backend_name(model.info.backend);
  j["device"] = model.device;
  j["created_by"] = command_line();
  j["batch"] = batch;
  j["new_tokens"] = run.new_tokens;
  j["temperature"] = run.sampling.temperature;
  j["top_k"] = run.sampling.top_k;
  j["top_p"] = run.sampling.top_p;
  j["min_tokens"] = run.spec.min_tokens;
  j["prompts"] = run.prompts_file.empty() ? "random ids" : run.prompts_file;
  j["draft_model"] = run.spec.draft_model_dir;
  return j;
}

}  // namespace

void run_report(RunArgs run, int32_t batch, ReportArgs r, const CLI::App &cmd) {
  if (r.plot && r.no_plot) {
    std::fprintf(stderr, "%s: --plot and --no-plot contradict each other\n", kCommand);
    throw CLI::RuntimeError(2);
  }
  apply_defaults(run, batch, r, cmd);
  check_lists(r);
  std::vector<SpecSettings> specs;
  for (const std::string &p : r.policies) specs.push_back(parse_policy_spec(p, run.spec, kCommand));
  SpecSettings heat = parse_policy_spec(r.heatmap_policy, run.spec, kCommand);
  check_writable_dir(r.dir, kCommand, "the report");

  const LoadedModel model = load_model(run.model);
  // --draft-model: one more series in the throughput and acceptance plots,
  // "model" (the draft model drafting every round at --gamma); it selects
  // nothing, so the ratio sweep and the heat map stay the policies'.
  LoadedModel draft;
  std::vector<SpecSettings> series = specs;
  if (!run.spec.draft_model_dir.empty()) {
    draft = load_draft_model(run.model, run.spec.draft_model_dir);
    series.push_back(draft_model_spec(run.spec, draft.model.get()));
  }
  const PromptSource source(run, model, kCommand);
  const int32_t max_gamma =
      std::max(run.spec.gamma, *std::max_element(r.gammas.begin(), r.gammas.end()));
  resolve_contexts(r, run, source, model, max_gamma);

  nlohmann::json vanilla_tps = nlohmann::json::array(), mean_contexts = nlohmann::json::array();
  std::vector<nlohmann::json> policy_tps(series.size(), nlohmann::json::array());
  std::vector<nlohmann::json> policy_tau(series.size(), nlohmann::json::array());
  nlohmann::json acceptance, tau_vs_ratio, heatmap;
  for (int32_t c : r.contexts) {
    ContextRuns runs(model, run, source.get(c, batch), max_gamma);
    mean_contexts.push_back(runs.mean_context());
    vanilla_tps.push_back(runs.vanilla());
    for (size_t i = 0; i < series.size(); ++i) {
      const Point &p = runs.speculative(series[i]);
      policy_tps[i].push_back(p.tokens_per_s);
      policy_tau[i].push_back(p.tau);
    }
    if (c != r.sweep_context) continue;
    acceptance = acceptance_json(runs, run, series);
    tau_vs_ratio = tau_vs_ratio_json(runs, run, r, specs);
    heatmap = heatmap_json(runs, r, heat);
  }
  nlohmann::json throughput_series = nlohmann::json::array();
  throughput_series.push_back({{"label", "vanilla"}, {"tokens_per_s", vanilla_tps}});
  for (size_t i = 0; i < series.size(); ++i)
    throughput_series.push_back(
        {{"label", series[i].label}, {"tokens_per_s", policy_tps[i]}, {"tau", policy_tau[i]}});

  nlohmann::json j = report_head(model, run, batch);
  j["throughput"] = {{"contexts", r.contexts},
                     {"mean_contexts", mean_contexts},
                     {"gamma", run.spec.gamma},
                     {"ratio", tidy(run.spec.ratio)},
                     {"series", throughput_series}};
  j["acceptance"] = acceptance;
  j["tau_vs_ratio"] = tau_vs_ratio;
  j["heatmap"] = heatmap;
  const std::string path = r.dir + "/report.json";
  write_file_atomically(path, j.dump(2) + "\n", kCommand);
  std::fprintf(stderr, "[report] wrote %s\n", path.c_str());
  if (r.no_plot) return;
  PlotRequest plot;
  plot.script = r.plot_script;
  plot.python = r.python;
  plot.required = r.plot || !r.plot_script.empty();
  if (run_plot_script(plot, path, r.dir, kCommand))
    std::fprintf(stderr, "[report] plots written to %s\n", r.dir.c_str());
}

}  // namespace vegas_cli
