// Subcommands of the `vegas` CLI; each file registers its own.
#pragma once

#include <CLI/CLI.hpp>

namespace vegas_cli {

// Directory of the embedded default model (used when --model is not given).
const char *default_model_dir();

void add_tokenize_commands(CLI::App &app);  // tokenize, detokenize
void add_generate_command(CLI::App &app);   // generate
void add_bench_command(CLI::App &app);      // bench

}  // namespace vegas_cli
