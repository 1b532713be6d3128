// `vegas bench`: decode and prefill throughput against the memory-bandwidth
// floor (DESIGN §7), one JSON object out. With --mode vegas it runs vanilla and
// speculative decoding on the same prompts and seeds in the same process and
// adds τ, acceptance by draft position, the draft/verify/select time shares and
// the speed-up (decode tokens/s, each sequence's first token excluded).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <utility>
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
  // --mode vegas
  bool baseline = true;  // also run vanilla on the same prompts, for the speed-up
  std::string policy = "vegas";
  int32_t gamma = 6;
  float ratio = 0.07f;
  int32_t min_tokens = 256;
  float window_share = 0.5f;
  int32_t sink = 16;
  std::string score_kind = "weight";
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

// One generation over `prompts` in a fresh session of the given options: the
// prefill (until every sequence has its first token) and the decode that follows.
struct Measured {
  double prefill_s = 0.0;
  double decode_s = 0.0;
  double median_step_s = 0.0;
  int64_t decode_steps = 0;
  int64_t decode_tokens = 0;  // tokens committed after each sequence's first
  // Steady state: tokens per second over the decode steps after the first
  // kWarmupSteps (graph capture, GEMM plans and buffer growth happen there;
  // a speculative run has several step shapes and far fewer steps to amortise them).
  double steady_tokens_per_s = 0.0;
  vegas_session_stats stats{};
  std::vector<std::vector<int32_t>> tokens;  // per sequence
};

Measured measure(vegas_model *model, const vegas_session_options &so, const BenchArgs &a,
                 const std::vector<std::vector<int32_t>> &prompts) {
  vegas_session *session = nullptr;
  check(vegas_session_create(model, &so, &session), "creating the session");
  std::unique_ptr<vegas_session, void (*)(vegas_session *)> session_guard(session,
                                                                          vegas_session_free);
  vegas_sampling_options sampling;
  vegas_sampling_options_init(&sampling);
  sampling.temperature = a.temperature;
  sampling.top_k = a.top_k;
  sampling.top_p = a.top_p;
  std::vector<int32_t> seqs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    sampling.seed = a.seed + i;  // the same seeds in every mode
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
  auto generated = [&]() {
    int64_t started = 0, total = 0;
    for (int32_t id : seqs) {
      vegas_sequence_info si;
      si.struct_size = sizeof(si);
      check(vegas_sequence_get_info(session, id, &si), "info");
      started += si.n_generated > 0 || si.finish_reason != VEGAS_FINISH_NONE;
      total += si.n_generated;
    }
    return std::make_pair(started, total);
  };
  Measured m;
  // Prefill: steps until every sequence has its first token.
  const double t_prefill = now_s();
  int32_t active = 0;
  while (generated().first < static_cast<int64_t>(seqs.size()))
    check(vegas_session_step(session, &active), "prefill step");
  m.prefill_s = now_s() - t_prefill;
  const int64_t after_prefill = generated().second;

  std::vector<double> steps;
  std::vector<int64_t> committed;  // tokens generated so far, after each step
  while (active > 0) {
    const double t0 = now_s();
    check(vegas_session_step(session, &active), "decode step");
    steps.push_back(now_s() - t0);
    committed.push_back(generated().second);
  }
  constexpr size_t kWarmupSteps = 3;
  if (steps.size() > 2 * kWarmupSteps) {
    double t = 0.0;
    for (size_t i = kWarmupSteps; i < steps.size(); ++i) t += steps[i];
    const int64_t tokens = committed.back() - committed[kWarmupSteps - 1];
    m.steady_tokens_per_s = t > 0 ? static_cast<double>(tokens) / t : 0.0;
  }
  // The first decode step may still contain graph capture / warm-up: drop it from the median.
  std::vector<double> warm(steps.size() > 2 ? steps.begin() + 1 : steps.begin(), steps.end());
  m.median_step_s = median(warm);
  for (double s : steps) m.decode_s += s;
  m.decode_steps = static_cast<int64_t>(steps.size());
  m.decode_tokens = generated().second - after_prefill;
  m.stats.struct_size = sizeof(m.stats);
  check(vegas_session_get_stats(session, &m.stats), "session stats");
  for (int32_t id : seqs) {
    std::vector<int32_t> ids(static_cast<size_t>(a.new_tokens));
    size_t n = 0;
    check(vegas_sequence_tokens(session, id, ids.data(), ids.size(), &n), "tokens");
    ids.resize(n);
    m.tokens.push_back(std::move(ids));
  }
  return m;
}

nlohmann::json speculative_json(const Measured &m) {
  const vegas_session_stats &s = m.stats;
  nlohmann::json j;
  j["rounds"] = s.rounds;
  j["drafted"] = s.drafted;
  j["accepted"] = s.accepted;
  j["committed"] = s.committed;
  j["tau"] = s.tokens_per_round;
  std::vector<double> by_position;
  for (int32_t i = 0; i < s.gamma && i < VEGAS_MAX_GAMMA; ++i)
    by_position.push_back(s.drafted_at[i] > 0 ? static_cast<double>(s.accepted_at[i]) /
                                                    static_cast<double>(s.drafted_at[i])
                                              : 0.0);
  j["acceptance_by_position"] = by_position;
  const double round_s = s.draft_seconds + s.verify_seconds + s.select_seconds;
  j["draft_seconds"] = s.draft_seconds;
  j["verify_seconds"] = s.verify_seconds;
  j["select_seconds"] = s.select_seconds;
  j["draft_share"] = round_s > 0 ? s.draft_seconds / round_s : 0.0;
  j["verify_share"] = round_s > 0 ? s.verify_seconds / round_s : 0.0;
  j["select_share"] = round_s > 0 ? s.select_seconds / round_s : 0.0;
  return j;
}

void run_bench(const BenchArgs &a) {
  if (!a.synthetic.empty() && !a.prompts_file.empty()) {
    std::fprintf(stderr, "vegas bench: --synthetic has no tokenizer, so no --prompts\n");
    throw CLI::RuntimeError(2);
  }
  const bool vegas_mode = a.mode == "vegas";
  if (!vegas_mode && a.mode != "vanilla") {
    std::fprintf(stderr, "vegas bench: unknown --mode %s (vanilla or vegas)\n", a.mode.c_str());
    throw CLI::RuntimeError(2);
  }
  vegas_model_options mo;
  vegas_model_options_init(&mo);
  mo.backend = parse_backend(a.backend);
  mo.n_threads = a.threads;
  vegas_model *model = nullptr;
  if (a.synthetic.empty())
    check(vegas_model_load(a.model_dir.c_str(), &mo, &model), "loading the model");
  else  // random weights of the config's shapes, made on the device
    check(vegas_model_load_synthetic(a.synthetic.c_str(), a.seed, &mo, &model),
          "making the synthetic model");
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
  // Decoding is measured at the full batch: no sequence decodes (and finishes
  // early) while later prompts are still being prefilled.
  so.schedule = VEGAS_SCHEDULE_PREFILL_FIRST;
  // Room for every sequence plus a round's drafts.
  so.kv_bytes = static_cast<uint64_t>(a.batch) *
                static_cast<uint64_t>(max_prompt + a.new_tokens + a.gamma + 64) *
                info.kv_bytes_per_token;
  vegas_session_options vso = so;
  vso.mode = VEGAS_MODE_VEGAS;
  vso.policy = a.policy.c_str();
  vso.gamma = a.gamma;
  vso.ratio = a.ratio;
  vso.min_tokens = a.min_tokens;
  vso.window_share = a.window_share;
  vso.sink = a.sink;
  vso.score_kind = a.score_kind == "logit" ? VEGAS_SCORE_LOGIT : VEGAS_SCORE_WEIGHT;

  Measured vanilla;
  const bool with_vanilla = !vegas_mode || a.baseline;
  if (with_vanilla) vanilla = measure(model, so, a, prompts);
  Measured vegas;
  if (vegas_mode) vegas = measure(model, vso, a, prompts);
  const Measured &main_run = vegas_mode ? vegas : vanilla;

  const double avg_context =
      static_cast<double>(total_prompt) / std::max<size_t>(prompts.size(), 1) + a.new_tokens / 2.0;
  const double bytes_per_step =
      static_cast<double>(info.weight_bytes) + avg_context * static_cast<double>(prompts.size()) *
                                                   static_cast<double>(info.kv_bytes_per_token);
  // The bandwidth of the memory the weights live in (device memory on CUDA),
  // measured in this run.
  double bandwidth = 0.0;
  check(vegas_model_measure_bandwidth(model, &bandwidth), "vegas_model_measure_bandwidth");
  // The copy's read + written bytes per second is the memory's traffic rate, the
  // rate a read-only stream reaches too (H100: ~3000 GB/s both ways), so the
  // floor is the bytes a step reads at that rate (as bench_cuda_decode).
  const double floor_s = bytes_per_step / bandwidth;

  nlohmann::json j;
  j["model"] = info.architecture;
  j["synthetic"] = !a.synthetic.empty();
  j["backend"] = backend_name(info.backend);
  j["mode"] = a.mode;
  j["context"] = a.context;
  j["batch"] = static_cast<int32_t>(prompts.size());
  j["new_tokens"] = a.new_tokens;
  j["prompt_tokens"] = total_prompt;
  j["temperature"] = a.temperature;
  j["top_k"] = a.top_k;
  j["top_p"] = a.top_p;
  j["prefill_seconds"] = main_run.prefill_s;
  j["prefill_tokens_per_s"] = main_run.prefill_s > 0 ? total_prompt / main_run.prefill_s : 0.0;
  // Prefill work: 2 FLOPs per weight and token plus causal attention,
  // 2 * 2 * q_dim FLOPs per (query, key) pair per layer, over each prompt. The
  // embedding and the LM head (run on logit rows only) are not per-token GEMMs;
  // info cannot tell a tied head, so 2 * vocab * hidden is left out: exact for
  // untied models (Qwen3-8B), a lower bound for tied ones.
  double attn_pairs = 0.0;
  for (const auto &p : prompts)
    attn_pairs += 0.5 * static_cast<double>(p.size()) * static_cast<double>(p.size() + 1);
  const double q_dim = static_cast<double>(info.n_heads) * info.head_dim;
  const double gemm_params = static_cast<double>(info.n_params) -
                             2.0 * static_cast<double>(info.vocab_size) * info.hidden_size;
  const double prefill_flops =
      2.0 * std::max(gemm_params, 0.0) * static_cast<double>(total_prompt) +
      4.0 * q_dim * info.n_layers * attn_pairs;
  j["prefill_flops"] = prefill_flops;
  j["prefill_tflops_per_s"] =
      main_run.prefill_s > 0 ? prefill_flops / main_run.prefill_s / 1e12 : 0.0;
  j["decode_steps"] = main_run.decode_steps;
  j["median_step_ms"] = main_run.median_step_s * 1e3;
  j["bytes_per_step"] = bytes_per_step;
  j["copy_bandwidth_GBps"] = bandwidth / 1e9;
  j["floor_step_ms"] = floor_s * 1e3;
  const double vanilla_tps = vanilla.decode_s > 0 ? vanilla.decode_tokens / vanilla.decode_s : 0.0;
  if (with_vanilla) {
    // Vanilla commits one token per sequence and step.
    j["decode_tokens_per_s"] = vanilla.median_step_s > 0
                                   ? static_cast<double>(prompts.size()) / vanilla.median_step_s
                                   : 0.0;
    j["decode_tokens_per_s_mean"] = vanilla_tps;
    j["decode_tokens_per_s_steady"] = vanilla.steady_tokens_per_s;
    j["fraction_of_floor"] = vanilla.median_step_s > 0 ? floor_s / vanilla.median_step_s : 0.0;
  }
  if (vegas_mode) {
    nlohmann::json v = speculative_json(vegas);
    v["policy"] = a.policy;
    v["gamma"] = a.gamma;
    v["ratio"] = a.ratio;
    v["min_tokens"] = a.min_tokens;
    v["window_share"] = a.window_share;
    v["sink"] = a.sink;
    v["score_kind"] = a.score_kind;
    const double vegas_tps = vegas.decode_s > 0 ? vegas.decode_tokens / vegas.decode_s : 0.0;
    v["decode_tokens_per_s"] = vegas_tps;
    v["decode_tokens_per_s_steady"] = vegas.steady_tokens_per_s;
    if (with_vanilla && vanilla.steady_tokens_per_s > 0)
      v["speedup_steady"] = vegas.steady_tokens_per_s / vanilla.steady_tokens_per_s;
    v["prefill_seconds"] = vegas.prefill_s;
    if (with_vanilla) {
      v["speedup"] = vanilla_tps > 0 ? vegas_tps / vanilla_tps : 0.0;
      // Greedy speculative decoding must reproduce vanilla exactly.
      if (a.temperature <= 0.0f) v["identical_to_vanilla"] = vegas.tokens == vanilla.tokens;
    }
    j["vegas"] = v;
  }
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

void add_bench_command(CLI::App &app) {
  auto args = std::make_shared<BenchArgs>();
  args->model_dir = default_model_dir();
  CLI::App *cmd = app.add_subcommand("bench", "Measure prefill and decode throughput (JSON out)");
  cmd->add_option("--model", args->model_dir, "Model directory (default: the embedded model)");
  cmd->add_option("--synthetic", args->synthetic, "config.json for random weights (CUDA)");
  cmd->add_option("--prompts", args->prompts_file,
                  "JSONL prompts (field `text`) instead of random ids");
  cmd->add_option("--backend", args->backend, "cpu, cuda or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all cores)");
  cmd->add_option("--mode", args->mode, "vanilla or vegas");
  cmd->add_option("--context", args->context, "Prompt tokens per sequence")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--batch", args->batch, "Sequences decoded together")->check(CLI::PositiveNumber);
  cmd->add_option("--new-tokens", args->new_tokens, "Tokens generated per sequence")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", args->temperature, "0 = greedy");
  cmd->add_option("--top-k", args->top_k, "0 = off");
  cmd->add_option("--top-p", args->top_p, "1 = off");
  cmd->add_option("--seed", args->seed, "Seed for prompts and sampling");
  cmd->add_option("--policy", args->policy, "Selection policy for --mode vegas");
  cmd->add_option("--gamma", args->gamma, "Draft length for --mode vegas")
      ->check(CLI::Range(1, 32));
  cmd->add_option("--ratio", args->ratio, "Selected share of the KV for --mode vegas")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-tokens", args->min_tokens, "Selection floor for --mode vegas")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--window-share", args->window_share,
                  "Share of the budget kept for recent tokens")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--sink", args->sink, "Policy streaming: leading tokens always kept")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--score-kind", args->score_kind, "weight or logit")
      ->check(CLI::IsMember({"weight", "logit"}));
  cmd->add_flag("!--no-baseline", args->baseline,
                "With --mode vegas, skip the vanilla run (no speed-up reported)");
  cmd->callback([args]() { run_bench(*args); });
}

}  // namespace vegas_cli
