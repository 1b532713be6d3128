// `vegas generate`: complete a prompt, streaming text or printing one JSON object.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"

namespace vegas_cli {

namespace {

struct GenerateArgs {
  std::string model_dir;
  std::string prompt;
  std::string prompt_file;
  int32_t max_tokens = 128;
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  uint64_t seed = 0;
  std::string backend = "auto";
  int32_t threads = 0;
  std::string mode = "vanilla";
  std::string policy;  // empty: the library's default (vegas; auto mode: vegas+lookup)
  int32_t gamma = 6;
  float ratio = 0.07f;
  int32_t tree_branches = 1;  // token trees (vegas_session_options.tree_*)
  int32_t tree_depth = 0;
  std::string draft_model_dir;  // vegas_session_options.draft_model
  int32_t draft_window = 0;
  float window_share = 0.5f;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool json = false;
};

int32_t stream_piece(int32_t, int32_t, const char *piece, size_t len, void *) {
  std::fwrite(piece, 1, len, stdout);
  std::fflush(stdout);
  return 0;
}

ModelPtr load(const std::string &dir, const vegas_model_options &mo, const char *what) {
  vegas_model *m = nullptr;
  check(vegas_model_load(dir.c_str(), &mo, &m), what);
  return ModelPtr(m, vegas_model_free);
}

// The session for the prompt and the completion: --mode and its speculative
// settings, the draft model (the session keeps its own reference), and
// enough KV for both plus a page of slack per speculative round.
SessionPtr create_session(const GenerateArgs &a, vegas_model *model, vegas_model *draft,
                          const vegas_model_info &info, size_t n_prompt) {
  vegas_session_options so;
  vegas_session_options_init(&so);
  so.mode = a.mode == "vegas"  ? VEGAS_MODE_VEGAS
            : a.mode == "auto" ? VEGAS_MODE_AUTO
                               : VEGAS_MODE_VANILLA;
  so.policy = a.policy.empty() ? nullptr : a.policy.c_str();
  so.gamma = a.gamma;
  so.ratio = a.ratio;
  so.tree_branches = a.tree_branches;
  so.tree_depth = a.tree_depth;
  so.window_share = a.window_share;
  if (draft != nullptr) {
    so.draft_model = draft;
    so.draft_window = a.draft_window;
  }
  const uint64_t tokens_needed = n_prompt + static_cast<uint64_t>(a.max_tokens) + 64;
  so.kv_bytes = (tokens_needed + 64) * info.kv_bytes_per_token;
  if (so.kv_bytes < (64ull << 20)) so.kv_bytes = 64ull << 20;
  vegas_session *session = nullptr;
  check(vegas_session_create(model, &so, &session), "creating the session");
  return SessionPtr(session, vegas_session_free);
}

std::vector<int32_t> tokenize_prompt(vegas_model *model, const std::string &prompt) {
  std::vector<int32_t> ids(prompt.size() + 16);
  size_t n_ids = 0;
  check(vegas_tokenize(vegas_model_tokenizer(model), prompt.data(), prompt.size(), nullptr,
                       ids.data(), ids.size(), &n_ids),
        "tokenizing the prompt");
  ids.resize(n_ids);
  return ids;
}

// What a finished sequence produced.
struct Completion {
  vegas_sequence_info info{};
  std::vector<int32_t> tokens;
  std::string text;
  double seconds = 0.0;  // submit to the end of the run
};

// Submits the prompt with the sampling flags and runs the session to the end.
Completion complete(const GenerateArgs &a, vegas_session *session,
                    const std::vector<int32_t> &ids) {
  vegas_sampling_options sampling;
  vegas_sampling_options_init(&sampling);
  sampling.temperature = a.temperature;
  sampling.top_k = a.top_k;
  sampling.top_p = a.top_p;
  sampling.min_p = a.min_p;
  sampling.repetition_penalty = a.repetition_penalty;
  sampling.seed = a.seed;
  std::vector<const char *> stops;
  for (const std::string &s : a.stop) stops.push_back(s.c_str());
  vegas_request req;
  vegas_request_init(&req);
  req.prompt = ids.data();
  req.n_prompt = ids.size();
  req.sampling = &sampling;
  req.max_tokens = a.max_tokens;
  req.ignore_eos = a.ignore_eos ? 1 : 0;
  req.stop_strings = stops.empty() ? nullptr : stops.data();
  req.n_stop_strings = stops.size();
  req.on_token = a.json ? nullptr : stream_piece;
  int32_t seq = -1;
  Completion c;
  const auto t0 = std::chrono::steady_clock::now();
  vegas_status rs = vegas_session_submit(session, &req, &seq);
  if (rs == VEGAS_OK) rs = vegas_session_run(session);
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  check(rs, "generating");
  c.info.struct_size = sizeof(c.info);
  check(vegas_sequence_get_info(session, seq, &c.info), "sequence info");
  size_t n_out = 0;
  c.tokens.resize(static_cast<size_t>(c.info.n_generated) + 1);
  check(vegas_sequence_tokens(session, seq, c.tokens.data(), c.tokens.size(), &n_out), "tokens");
  c.tokens.resize(n_out);
  size_t n_text = 0;
  vegas_sequence_text(session, seq, nullptr, 0, &n_text);
  c.text.assign(n_text, '\0');
  check(vegas_sequence_text(session, seq, c.text.data(), c.text.size(), &n_text), "text");
  return c;
}

// --json's object, or the summary line on stderr after the streamed text.
void report(const GenerateArgs &a, const Completion &c, const vegas_model_info &info) {
  const vegas_sequence_info &si = c.info;
  static const char *reasons[] = {"running",  "eos",       "length", "stop",
                                  "callback", "cancelled", "error"};
  const char *reason =
      si.finish_reason >= 0 && si.finish_reason <= 6 ? reasons[si.finish_reason] : "?";
  const double decode_tps = si.decode_seconds > 0 ? (si.n_generated - 1) / si.decode_seconds : 0.0;
  const double prefill_tps = si.prefill_seconds > 0 ? si.n_prompt / si.prefill_seconds : 0.0;
  if (!a.json) {
    std::fprintf(
        stderr,
        "\n[%d prompt tokens, %d generated (%s) in %.2f s: prefill %.1f tok/s, decode %.1f "
        "tok/s, %s]\n",
        si.n_prompt, si.n_generated, reason, c.seconds, prefill_tps, decode_tps,
        backend_name(info.backend));
    return;
  }
  nlohmann::json j;
  j["tokens"] = c.tokens;
  j["text"] = c.text;
  j["stats"] = {{"prompt_tokens", si.n_prompt},
                {"generated_tokens", si.n_generated},
                {"finish_reason", reason},
                {"status", vegas_status_name(static_cast<vegas_status>(si.status))},
                {"backend", backend_name(info.backend)},
                {"mode", a.mode},
                {"seconds", c.seconds},
                {"prefill_seconds", si.prefill_seconds},
                {"decode_seconds", si.decode_seconds},
                {"prefill_tokens_per_s", prefill_tps},
                {"decode_tokens_per_s", decode_tps},
                {"rounds", si.rounds},
                {"drafted", si.drafted},
                {"accepted", si.accepted},
                {"tokens_per_round", si.tokens_per_round}};
  std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

void run_generate(const GenerateArgs &a) {
  const std::string prompt =
      a.prompt_file.empty() ? a.prompt : read_input_file(a.prompt_file, "prompt file");
  vegas_model_options mo;
  vegas_model_options_init(&mo);
  mo.backend = parse_backend(a.backend);
  mo.n_threads = a.threads;
  const ModelPtr model = load(a.model_dir, mo, "loading the model");
  ModelPtr draft(nullptr, vegas_model_free);  // --draft-model, on the same backend
  if (!a.draft_model_dir.empty()) draft = load(a.draft_model_dir, mo, "loading the draft model");
  vegas_model_info info;
  info.struct_size = sizeof(info);
  check(vegas_model_get_info(model.get(), &info), "model info");
  const std::vector<int32_t> ids = tokenize_prompt(model.get(), prompt);
  const SessionPtr session = create_session(a, model.get(), draft.get(), info, ids.size());
  const Completion c = complete(a, session.get(), ids);
  report(a, c, info);
  if (c.info.finish_reason == VEGAS_FINISH_ERROR) {
    std::fprintf(stderr, "vegas: generation stopped: %s\n",
                 vegas_status_name(static_cast<vegas_status>(c.info.status)));
    throw CLI::RuntimeError(1);
  }
}

}  // namespace

void add_generate_command(CLI::App &app) {
  auto args = std::make_shared<GenerateArgs>();
  args->model_dir = default_model_dir();
  CLI::App *cmd = app.add_subcommand("generate", "Complete a prompt with a model");
  cmd->add_option("--model", args->model_dir,
                  "Model directory or GGUF file (default: the embedded model)");
  auto *p = cmd->add_option("--prompt", args->prompt, "Prompt text");
  auto *pf = cmd->add_option("--prompt-file", args->prompt_file,
                             "Read the prompt from a file (- for standard input)");
  p->excludes(pf);
  pf->excludes(p);
  cmd->add_option("--max-tokens", args->max_tokens, "Tokens to generate")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--temperature", args->temperature, "0 = greedy")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", args->top_k, "0 = off")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", args->top_p, "1 = off")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--min-p", args->min_p, "0 = off")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--repetition-penalty", args->repetition_penalty, "1 = off");
  cmd->add_option("--seed", args->seed, "RNG seed");
  cmd->add_option("--backend", args->backend, "cpu, cuda or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all cores)");
  cmd->add_option("--mode", args->mode, "vanilla, vegas, or auto (Vegas while it pays)")
      ->check(CLI::IsMember({"vanilla", "vegas", "auto"}));
  cmd->add_option("--policy", args->policy,
                  "Selection policy for --mode vegas (default vegas; --mode auto: vegas+lookup)");
  cmd->add_option("--gamma", args->gamma, "Draft length for --mode vegas");
  cmd->add_option("--ratio", args->ratio, "Selected share of the KV for --mode vegas");
  cmd->add_option("--tree-branches", args->tree_branches,
                  "Token trees for --mode vegas: drafts per branching level (1 = a chain)");
  cmd->add_option("--tree-depth", args->tree_depth, "Token trees: draft levels that branch");
  cmd->add_option("--draft-model", args->draft_model_dir,
                  "--mode vegas: a smaller model of the same tokenizer drafts (directory)");
  cmd->add_option("--draft-window", args->draft_window,
                  "--draft-model: its draft passes see the last N tokens (0 = all)");
  cmd->add_option("--window-share", args->window_share,
                  "Share of the budget kept for recent tokens");
  cmd->add_option("--stop", args->stop, "Stop string (repeatable)");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "Do not stop at end-of-sequence tokens");
  cmd->add_flag("--json", args->json, "Print one JSON object instead of streaming text");
  cmd->callback([args]() {
    if (args->prompt.empty() && args->prompt_file.empty()) {
      std::fprintf(stderr, "vegas generate: give --prompt or --prompt-file\n");
      throw CLI::RuntimeError(2);
    }
    run_generate(*args);
  });
}

}  // namespace vegas_cli
