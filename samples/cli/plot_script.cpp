#include "plot_script.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>

#ifndef _WIN32
#include <sys/wait.h>
#endif

namespace vegas_cli {

namespace {

// tools/plot_bench.py's exit status when matplotlib cannot be imported.
constexpr int kNoMatplotlib = 3;
// The shell's status for a command it cannot find or run.
constexpr int kShellNotFound = 127;

bool is_file(const std::filesystem::path &p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}

// POSIX shell single quoting: 'it'\''s'.
std::string quote(const std::string &s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int exit_status(int raw) {
#ifdef _WIN32
  return raw;
#else
  if (raw == -1) return kShellNotFound;
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + (WIFSIGNALED(raw) ? WTERMSIG(raw) : 0);
#endif
}

}  // namespace

std::string find_plot_script() {
  std::vector<std::filesystem::path> candidates;
  if (const char *src = std::getenv("VEGAS_SOURCE_DIR"))
    candidates.push_back(std::filesystem::path(src) / "tools" / "plot_bench.py");
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path bin = exe.parent_path();
    candidates.push_back(bin / ".." / ".." / "tools" / "plot_bench.py");
    candidates.push_back(bin / ".." / "share" / "vegas" / "plot_bench.py");
  }
  for (const auto &c : candidates)
    if (is_file(c)) return std::filesystem::weakly_canonical(c, ec).string();
  return "";
}

bool run_plot_script(const PlotRequest &request, const std::string &report_path,
                     const std::string &out_dir, const char *command) {
  auto unavailable = [&](const std::string &why) {
    std::fprintf(stderr, "%s: %s %s\n", command,
                 request.required ? "cannot plot:" : "no plots:", why.c_str());
    if (request.required) throw CLI::RuntimeError(1);
    return false;
  };
  const std::string script = request.script.empty() ? find_plot_script() : request.script;
  if (script.empty())
    return unavailable(
        "tools/plot_bench.py not found (give --plot-script or set VEGAS_SOURCE_DIR)");
  if (!is_file(script)) return unavailable("no plot script " + script);
  const std::string cmd =
      quote(request.python) + " " + quote(script) + " " + quote(report_path) + " " + quote(out_dir);
  std::fflush(stdout);
  std::fflush(stderr);
  const int status = exit_status(std::system(cmd.c_str()));
  if (status == 0) return true;
  if (status == kShellNotFound) return unavailable(request.python + " cannot be run");
  if (status == kNoMatplotlib)
    return unavailable("matplotlib is missing for " + request.python + " (pip install matplotlib)");
  std::fprintf(stderr, "%s: %s failed (exit %d) on %s\n", command, script.c_str(), status,
               report_path.c_str());
  throw CLI::RuntimeError(1);
}

}  // namespace vegas_cli
