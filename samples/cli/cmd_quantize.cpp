// `vegas quantize`: a Hugging Face model directory written as one GGUF file
// (vegas_model_quantize), for llama.cpp and for libvegas's quantized kernels.
// Prints {"model","out","type","bytes","seconds"} on standard output.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "vegas.h"

namespace vegas_cli {

namespace {

struct QuantizeArgs {
  std::string model_dir, out, type = "q8_0";
};

// The file's size, or the sum of the directory's files (fp8); 0 if unreadable.
uintmax_t output_bytes(const std::string &out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files{out};
  if (fs::is_directory(out, ec)) files.assign(fs::directory_iterator(out, ec), {});
  uintmax_t bytes = 0;
  for (const fs::path &f : files) {
    const uintmax_t size = fs::file_size(f, ec);
    if (!ec) bytes += size;
  }
  return bytes;
}

void run_quantize(const QuantizeArgs &a) {
  const std::string dir = a.model_dir.empty() ? default_model_dir() : a.model_dir;
  const auto t0 = std::chrono::steady_clock::now();
  check(vegas_model_quantize(dir.c_str(), a.out.c_str(), a.type.c_str()), "quantize");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const nlohmann::json summary = {{"model", dir},
                                  {"out", a.out},
                                  {"type", a.type},
                                  {"bytes", output_bytes(a.out)},
                                  {"seconds", s}};
  std::printf("%s\n", summary.dump().c_str());
}

}  // namespace

void add_quantize_command(CLI::App &app) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App *cmd = app.add_subcommand(
      "quantize", "Write a model directory as a GGUF file (q8_0, q4_0, ...) or as FP8");
  cmd->add_option("--model", args->model_dir,
                  "Hugging Face model directory (default: the embedded model)");
  cmd->add_option("--out", args->out, "The GGUF file (or, with fp8, the directory) to write")
      ->required();
  cmd->add_option(
      "--type", args->type,
      "What the matrices become: q8_0 (default), q4_0, q4_k, q5_k, q6_k, q4_k_m, q5_k_m, bf16, "
      "f16, f32, fp8 (a Hugging Face directory)");
  cmd->callback([args] { run_quantize(*args); });
}

}  // namespace vegas_cli
