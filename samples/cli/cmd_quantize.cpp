// `vegas quantize`: a Hugging Face model directory written as one GGUF file
// (vegas_model_quantize), for llama.cpp and for libvegas's quantized kernels.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli_util.h"
#include "commands.h"
#include "vegas.h"

namespace vegas_cli {

namespace {

struct QuantizeArgs {
  std::string model_dir, out, type = "q8_0";
};

void run_quantize(const QuantizeArgs &a) {
  const std::string dir = a.model_dir.empty() ? default_model_dir() : a.model_dir;
  const auto t0 = std::chrono::steady_clock::now();
  check(vegas_model_quantize(dir.c_str(), a.out.c_str(), a.type.c_str()), "quantize");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "vegas quantize: %s -> %s (%s) in %.1f s\n", dir.c_str(), a.out.c_str(),
               a.type.c_str(), s);
}

}  // namespace

void add_quantize_command(CLI::App &app) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App *cmd =
      app.add_subcommand("quantize", "Write a model directory as a GGUF file (q8_0, q4_0, ...)");
  cmd->add_option("--model", args->model_dir,
                  "Hugging Face model directory (default: the embedded model)");
  cmd->add_option("--out", args->out, "The GGUF file to write")->required();
  cmd->add_option("--type", args->type,
                  "What the matrices become: q8_0 (default), q4_0, bf16, f16, f32");
  cmd->callback([args] { run_quantize(*args); });
}

}  // namespace vegas_cli
