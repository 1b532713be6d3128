// `vegas bench --report DIR`: the sweeps behind the four plots of
// tools/plot_bench.py, written to DIR/report.json (format "vegas-report/1"):
//  - decode tokens/s against context length for vanilla and every policy;
//  - acceptance probability by draft position (Vegas paper, Figure 4), from
//    those runs at the sweep context;
//  - τ against the sparsity ratio for every policy (Figure 8);
//  - tokens/s over a γ × ratio grid for one policy (Figure 13).
// Then it runs the plot script. Plotting is optional unless --plot is given:
// when python3, the script or matplotlib is missing, the command says so and
// still succeeds with the JSON; with --plot that is an error (exit 1). A
// script that fails on the report it was given is always an error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_measure.h"

namespace vegas_cli {

struct ReportArgs {
  std::string dir;                    // --report DIR; empty: no report
  std::vector<int32_t> contexts;      // empty: 2048, 8192, 16384 cut to the prompts and model
  std::vector<std::string> policies;  // "policy" or "policy:window_share"
  std::vector<float> ratios;          // τ-vs-ratio and heat-map columns
  std::vector<int32_t> gammas;        // heat-map rows
  int32_t sweep_context = 0;          // 0: the context nearest 8192
  std::string heatmap_policy = "vegas:0.5";
  bool quick = false;  // a tiny sweep (tests, CI)
  bool plot = false;   // plotting must succeed
  bool no_plot = false;
  std::string plot_script;  // default: found next to the executable or in $VEGAS_SOURCE_DIR
  std::string python = "python3";
};

void add_report_options(CLI::App *cmd, ReportArgs &report);
// `cmd` tells which of the shared options were given (the report's defaults
// differ from a single bench run's: batch 16, 128 new tokens).
void run_report(RunArgs run, int32_t batch, ReportArgs report, const CLI::App &cmd);

}  // namespace vegas_cli
