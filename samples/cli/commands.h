// Subcommands of the `vegas` CLI; each file registers its own.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace vegas_cli {

// Directory of the embedded default model (used when --model is not given).
const char *default_model_dir();
// The command line the CLI was started with, words joined by spaces (recorded
// in the files that tune and bench --report write).
const std::string &command_line();

void add_tokenize_commands(CLI::App &app);  // tokenize, detokenize
void add_generate_command(CLI::App &app);   // generate
void add_bench_command(CLI::App &app);      // bench (and bench --report)
void add_tune_command(CLI::App &app);       // tune
void add_quantize_command(CLI::App &app);   // quantize

}  // namespace vegas_cli
