// Running tools/plot_bench.py from the CLI (`vegas bench --report`).
#pragma once

#include <string>

namespace vegas_cli {

struct PlotRequest {
  std::string script;     // empty: search (see find_plot_script)
  std::string python;     // interpreter, e.g. "python3"
  bool required = false;  // a missing interpreter, script or matplotlib is an error
};

// The first that exists of: $VEGAS_SOURCE_DIR/tools/plot_bench.py,
// <executable dir>/../../tools/plot_bench.py (a build tree inside the source
// tree), <executable dir>/../share/vegas/plot_bench.py; "" if none does.
std::string find_plot_script();

// Runs `python script report out_dir`. Returns true when the plots were made.
// When they could not be (no interpreter, no script, no matplotlib) it prints
// why on stderr and returns false, or fails (exit 1) if `required`; a script
// that rejects the report always fails.
bool run_plot_script(const PlotRequest &request, const std::string &report_path,
                     const std::string &out_dir, const char *command);

}  // namespace vegas_cli
