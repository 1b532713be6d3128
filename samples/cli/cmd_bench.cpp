// `vegas bench`: decode and prefill throughput against the memory-bandwidth
// floor (DESIGN §7), one JSON object out.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"

namespace vegas_cli {

namespace {

struct BenchArgs {
  std::string model_dir;
  std::string synthetic;
  std::string prompts_file;
  std::string backend = "auto";
  std::string mode = "vanilla";
  int32_t threads = 0;
  int32_t context = 2048;
  int32_t batch = 1;
  int32_t new_tokens = 32;
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 1;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Host memcpy bandwidth (read + write bytes per second), median of 5 copies of 256 MiB.
double host_copy_bandwidth() {
  const size_t bytes = 256u << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  std::vector<double> rates;
  for (int i = 0; i < 5; ++i) {
    a[static_cast<size_t>(i)] = static_cast<char>(i);  // fresh input each time
    const double t0 = now_s();
    std::memcpy(b.data(), a.data(), bytes);
    const double dt = now_s() - t0;
    if (b[static_cast<size_t>(i)] != static_cast<char>(i)) throw CLI::RuntimeError(3);
    rates.push_back(2.0 * static_cast<double>(bytes) / dt);
  }
  return median(rates);
}

std::vector<std::vector<int32_t>> make_prompts(const BenchArgs &a, const vegas_tokenizer *tok,
                                               int32_t vocab) {
  std::vector<std::vector<int32_t>> prompts;
  if (!a.prompts_file.empty()) {
    std::ifstream in(a.prompts_file);
    if (!in) {
      std::fprintf(stderr, "vegas bench: cannot read %s\n", a.prompts_file.c_str());
      throw CLI::RuntimeError(1);
    }
    std::string line;
    std::vector<std::vector<int32_t>> all;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const auto j = nlohmann::json::parse(line);
      const std::string text = j.at("text").get<std::string>();
      std::vector<int32_t> ids(text.size() + 16);
      size_t n = 0;
      check(vegas_tokenize(tok, text.data(), text.size(), nullptr, ids.data(), ids.size(), &n),
            "tokenizing a prompt");
      // Keep the prompts whose length is nearest the requested context.
      if (static_cast<int32_t>(n) >= a.context) {
        ids.resize(static_cast<size_t>(a.context));
      } else {
        ids.resize(n);
      }
      all.push_back(std::move(ids));
    }
    std::stable_sort(all.begin(), all.end(), [&](const auto &x, const auto &y) {
      return std::abs(static_cast<int64_t>(x.size()) - a.context) <
             std::abs(static_cast<int64_t>(y.size()) - a.context);
    });
    for (int32_t i = 0; i < a.batch && !all.empty(); ++i)
      prompts.push_back(all[static_cast<size_t>(i) % std::min<size_t>(all.size(), 8)]);
  } else {
    std::mt19937 rng(static_cast<uint32_t>(a.seed));
    std::uniform_int_distribution<int32_t> dist(16, vocab - 1);
    for (int32_t i = 0; i < a.batch; ++i) {
      std::vector<int32_t> ids(static_cast<size_t>(a.context));
      for (int32_t &t : ids) t = dist(rng);
      prompts.push_back(std::move(ids));
    }
  }
  return prompts;
}

void run_bench(const BenchArgs &a) {
  if (!a.synthetic.empty()) {
    std::fprintf(stderr, "vegas bench: --synthetic is not built yet (needs the CUDA backend)\n");
    throw CLI::RuntimeError(2);
  }
  if (a.mode != "vanilla") {
    std::fprintf(stderr, "vegas bench: --mode %s is not built yet\n", a.mode.c_str());
    throw CLI::RuntimeError(2);
  }
  vegas_model_options mo;
  vegas_model_options_init(&mo);
  mo.backend = parse_backend(a.backend);
  mo.n_threads = a.threads;
  vegas_model *model = nullptr;
  check(vegas_model_load(a.model_dir.c_str(), &mo, &model), "loading the model");
  std::unique_ptr<vegas_model, void (*)(vegas_model *)> model_guard(model, vegas_model_free);
  vegas_model_info info;
  info.struct_size = sizeof(info);
  check(vegas_model_get_info(model, &info), "model info");

  const auto prompts = make_prompts(a, vegas_model_tokenizer(model), info.vocab_size);
  int64_t total_prompt = 0, max_prompt = 0;
  for (const auto &p : prompts) {
    total_prompt += static_cast<int64_t>(p.size());
    max_prompt = std::max<int64_t>(max_prompt, static_cast<int64_t>(p.size()));
  }
  vegas_session_options so;
  vegas_session_options_init(&so);
  so.max_batch = std::max(a.batch, 1);
  so.prefill_chunk = 2048;
  so.kv_bytes = static_cast<uint64_t>(a.batch) * static_cast<uint64_t>(max_prompt + a.new_tokens + 64) *
                info.kv_bytes_per_token;
  vegas_session *session = nullptr;
  check(vegas_session_create(model, &so, &session), "creating the session");
  std::unique_ptr<vegas_session, void (*)(vegas_session *)> session_guard(session, vegas_session_free);

  vegas_sampling_options sampling;
  vegas_sampling_options_init(&sampling);
  sampling.temperature = a.temperature;
  sampling.top_k = a.top_k;
  sampling.top_p = a.top_p;
  std::vector<int32_t> seqs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    sampling.seed = a.seed + i;
    vegas_request req;
    vegas_request_init(&req);
    req.prompt = prompts[i].data();
    req.n_prompt = prompts[i].size();
    req.sampling = &sampling;
    req.max_tokens = a.new_tokens;
    req.ignore_eos = 1;
    int32_t id = -1;
    check(vegas_session_submit(session, &req, &id), "submitting");
    seqs.push_back(id);
  }
  // Prefill: steps until every sequence has its first token.
  const double t_prefill = now_s();
  auto all_started = [&]() {
    for (int32_t id : seqs) {
      vegas_sequence_info si;
      si.struct_size = sizeof(si);
      check(vegas_sequence_get_info(session, id, &si), "info");
      if (si.n_generated == 0 && si.finish_reason == VEGAS_FINISH_NONE) return false;
    }
    return true;
  };
  int32_t active = 0;
  while (!all_started()) check(vegas_session_step(session, &active), "prefill step");
  const double prefill_s = now_s() - t_prefill;

  std::vector<double> steps;
  int64_t generated_in_decode = 0;
  for (;;) {
    const double t0 = now_s();
    check(vegas_session_step(session, &active), "decode step");
    steps.push_back(now_s() - t0);
    generated_in_decode += static_cast<int64_t>(seqs.size());  // vanilla: one token per sequence
    if (active == 0) break;
  }
  // The first decode step may still contain graph capture / warm-up: drop it from the median.
  std::vector<double> warm(steps.size() > 2 ? steps.begin() + 1 : steps.begin(), steps.end());
  const double step_s = median(warm);
  double decode_s = 0;
  for (double s : steps) decode_s += s;

  const double avg_context = static_cast<double>(total_prompt) / std::max<size_t>(prompts.size(), 1) +
                             a.new_tokens / 2.0;
  const double bytes_per_step = static_cast<double>(info.weight_bytes) +
                                avg_context * static_cast<double>(prompts.size()) *
                                    static_cast<double>(info.kv_bytes_per_token);
  const double bandwidth = host_copy_bandwidth();
  const double floor_s = bytes_per_step / (bandwidth / 2.0);  // a copy moves each byte twice

  nlohmann::json j;
  j["model"] = info.architecture;
  j["backend"] = backend_name(info.backend);
  j["mode"] = a.mode;
  j["context"] = a.context;
  j["batch"] = static_cast<int32_t>(prompts.size());
  j["new_tokens"] = a.new_tokens;
  j["prompt_tokens"] = total_prompt;
  j["prefill_seconds"] = prefill_s;
  j["prefill_tokens_per_s"] = prefill_s > 0 ? total_prompt / prefill_s : 0.0;
  j["decode_steps"] = steps.size();
  j["median_step_ms"] = step_s * 1e3;
  j["decode_tokens_per_s"] = step_s > 0 ? static_cast<double>(prompts.size()) / step_s : 0.0;
  j["decode_tokens_per_s_mean"] = decode_s > 0 ? generated_in_decode / decode_s : 0.0;
  j["bytes_per_step"] = bytes_per_step;
  j["copy_bandwidth_GBps"] = bandwidth / 1e9;
  j["floor_step_ms"] = floor_s * 1e3;
  j["fraction_of_floor"] = step_s > 0 ? floor_s / step_s : 0.0;
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

void add_bench_command(CLI::App &app) {
  auto args = std::make_shared<BenchArgs>();
  args->model_dir = default_model_dir();
  CLI::App *cmd = app.add_subcommand("bench", "Measure prefill and decode throughput (JSON out)");
  cmd->add_option("--model", args->model_dir, "Model directory (default: the embedded model)");
  cmd->add_option("--synthetic", args->synthetic, "config.json for random weights (CUDA)");
  cmd->add_option("--prompts", args->prompts_file, "JSONL prompts (field `text`) instead of random ids");
  cmd->add_option("--backend", args->backend, "cpu, cuda or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all cores)");
  cmd->add_option("--mode", args->mode, "vanilla or vegas");
  cmd->add_option("--context", args->context, "Prompt tokens per sequence")->check(CLI::PositiveNumber);
  cmd->add_option("--batch", args->batch, "Sequences decoded together")->check(CLI::PositiveNumber);
  cmd->add_option("--new-tokens", args->new_tokens, "Tokens generated per sequence")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", args->temperature, "0 = greedy");
  cmd->add_option("--top-k", args->top_k, "0 = off");
  cmd->add_option("--top-p", args->top_p, "1 = off");
  cmd->add_option("--seed", args->seed, "Seed for prompts and sampling");
  cmd->callback([args]() { run_bench(*args); });
}

}  // namespace vegas_cli
