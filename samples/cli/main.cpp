// `vegas`: the command-line front end of libvegas, written against the public
// C ABI alone (include/vegas.h).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "commands.h"
#include "vegas.h"

namespace vegas_cli {

const char *default_model_dir() {
  if (const char *env = std::getenv("VEGAS_MODEL_DIR")) return env;
  return VEGAS_DEFAULT_MODEL_DIR;
}

namespace {
std::string g_command_line;
}

const std::string &command_line() {
  return g_command_line;
}

}  // namespace vegas_cli

int main(int argc, char **argv) {
  if (vegas_version_number() != VEGAS_VERSION_NUMBER) {
    std::fprintf(stderr, "vegas: header %d and library %u versions differ\n", VEGAS_VERSION_NUMBER,
                 vegas_version_number());
    return 1;
  }
  for (int i = 0; i < argc; ++i)
    vegas_cli::g_command_line += (i ? " " : "") + std::string(i ? argv[i] : "vegas");
  CLI::App app{std::string("vegas ") + vegas_version() + ": LLM inference with libvegas"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(vegas_version()));
  vegas_cli::add_tokenize_commands(app);
  vegas_cli::add_generate_command(app);
  vegas_cli::add_bench_command(app);
  vegas_cli::add_tune_command(app);
  vegas_cli::add_quantize_command(app);
  // No exception leaves the command: an allocation failure or a library
  // error the command did not expect is a message and exit status 1.
  try {
    CLI11_PARSE(app, argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "vegas: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
