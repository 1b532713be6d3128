// The command-line options every measuring command (bench, tune) shares.
#pragma once

#include <CLI/CLI.hpp>

#include "bench_measure.h"

namespace vegas_cli {

// --model, --synthetic, --prompts, --backend, --threads, --new-tokens, the
// sampling flags and the speculative settings no sweep varies (--min-tokens,
// --sink, --score-kind). --model defaults to the embedded model.
void add_run_options(CLI::App *cmd, RunArgs &run);

}  // namespace vegas_cli
