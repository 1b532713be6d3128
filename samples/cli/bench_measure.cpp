#include "bench_measure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <utility>

#include "cli_util.h"

namespace vegas_cli {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string base_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string trim(const std::string &s) {
  const char *space = " \t\r\n";
  const size_t b = s.find_first_not_of(space);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(space) - b + 1);
}

// Informational only: the CPU's model name, or the GPU's as nvidia-smi reports it.
std::string device_name(int32_t backend) {
  if (backend == VEGAS_BACKEND_CUDA) {
#ifndef _WIN32
    if (FILE *p =
            popen("nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null", "r")) {
      char line[256] = {0};
      const bool got = std::fgets(line, sizeof line, p) != nullptr;
      pclose(p);
      if (got && !trim(line).empty()) return trim(line);
    }
#endif
    return "CUDA device 0";
  }
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return trim(line.substr(colon + 1));
    }
  }
  return "CPU";
}

}  // namespace

double tidy(float x) {
  return std::round(static_cast<double>(x) * 1e6) / 1e6;
}

std::vector<double> tidy(const std::vector<float> &xs) {
  std::vector<double> out;
  out.reserve(xs.size());
  for (float x : xs) out.push_back(tidy(x));
  return out;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

LoadedModel load_model(const ModelArgs &a) {
  vegas_model_options mo;
  vegas_model_options_init(&mo);
  mo.backend = parse_backend(a.backend);
  mo.n_threads = a.threads;
  LoadedModel out;
  vegas_model *model = nullptr;
  if (a.synthetic.empty())
    check(vegas_model_load(a.model_dir.c_str(), &mo, &model), "loading the model");
  else  // random weights of the config's shapes, made on the device
    check(vegas_model_load_synthetic(a.synthetic.c_str(), a.seed, &mo, &model),
          "making the synthetic model");
  out.model.reset(model);
  out.info.struct_size = sizeof(out.info);
  check(vegas_model_get_info(model, &out.info), "model info");
  out.name = base_name(a.synthetic.empty() ? a.model_dir : a.synthetic);
  out.device = device_name(out.info.backend);
  return out;
}

LoadedModel load_draft_model(const ModelArgs &target, const std::string &dir) {
  ModelArgs args = target;
  args.model_dir = dir;
  args.synthetic.clear();
  return load_model(args);
}

Prompts read_prompt_file(const std::string &path, const vegas_tokenizer *tok, const char *command) {
  std::istringstream in(read_input_file(path, "prompts file"));
  Prompts all;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.empty()) continue;
    std::string text;
    try {
      text = nlohmann::json::parse(line).at("text").get<std::string>();
    } catch (const nlohmann::json::exception &e) {
      std::fprintf(stderr, "%s: %s line %d: no JSON object with a string `text` (%s)\n", command,
                   path.c_str(), line_no, e.what());
      throw CLI::RuntimeError(1);
    }
    std::vector<int32_t> ids(text.size() + 16);
    size_t n = 0;
    check(vegas_tokenize(tok, text.data(), text.size(), nullptr, ids.data(), ids.size(), &n),
          "tokenizing a prompt");
    ids.resize(n);
    if (!ids.empty()) all.push_back(std::move(ids));
  }
  if (all.empty()) {
    std::fprintf(stderr, "%s: %s holds no prompts\n", command, path.c_str());
    throw CLI::RuntimeError(1);
  }
  return all;
}

Prompts pick_prompts(const Prompts &all, int32_t context, int32_t batch) {
  // Distance of a prompt's length, once cut to `context`, from `context`:
  // longer prompts count as exact.
  auto distance = [&](const std::vector<int32_t> &p) {
    return context - std::min<int64_t>(static_cast<int64_t>(p.size()), context);
  };
  Prompts sorted = all;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](const auto &x, const auto &y) { return distance(x) < distance(y); });
  Prompts prompts;
  for (int32_t i = 0; i < batch && !sorted.empty(); ++i) {
    std::vector<int32_t> p = sorted[static_cast<size_t>(i) % std::min<size_t>(sorted.size(), 8)];
    if (static_cast<int32_t>(p.size()) > context) p.resize(static_cast<size_t>(context));
    prompts.push_back(std::move(p));
  }
  return prompts;
}

Prompts random_prompts(int32_t context, int32_t batch, uint64_t seed, int32_t vocab) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int32_t> dist(16, vocab - 1);
  Prompts prompts;
  for (int32_t i = 0; i < batch; ++i) {
    std::vector<int32_t> ids(static_cast<size_t>(context));
    for (int32_t &t : ids) t = dist(rng);
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

double mean_length(const Prompts &prompts) {
  double total = 0.0;
  for (const auto &p : prompts) total += static_cast<double>(p.size());
  return prompts.empty() ? 0.0 : total / static_cast<double>(prompts.size());
}

PromptSource::PromptSource(const RunArgs &args, const LoadedModel &model, const char *command)
    : seed_(args.sampling.seed), vocab_(model.info.vocab_size) {
  if (args.prompts_file.empty()) return;
  const vegas_tokenizer *tok = vegas_model_tokenizer(model.model.get());
  if (!tok) {
    std::fprintf(stderr, "%s: this model has no tokenizer (synthetic), so no --prompts\n", command);
    throw CLI::RuntimeError(2);
  }
  all_ = read_prompt_file(args.prompts_file, tok, command);
  random_ = false;
}

Prompts PromptSource::get(int32_t context, int32_t batch) const {
  return random_ ? random_prompts(context, batch, seed_, vocab_)
                 : pick_prompts(all_, context, batch);
}

int64_t PromptSource::longest() const {
  if (random_) return -1;
  size_t n = 0;
  for (const auto &p : all_) n = std::max(n, p.size());
  return static_cast<int64_t>(n);
}

void check_contexts(const std::vector<int32_t> &contexts, int32_t new_tokens, int32_t max_gamma,
                    const vegas_model_info &info, const char *command, const char *option) {
  if (contexts.empty()) {
    std::fprintf(stderr, "%s: %s is empty\n", command, option);
    throw CLI::RuntimeError(2);
  }
  for (int32_t c : contexts) {
    const int64_t room = static_cast<int64_t>(info.max_context) - new_tokens - max_gamma;
    if (c <= 0 || (info.max_context > 0 && c > room)) {
      std::fprintf(stderr,
                   "%s: %s %d: a context must be positive and leave room for %d new tokens "
                   "and %d drafts in the model's %d positions\n",
                   command, option, c, new_tokens, max_gamma, info.max_context);
      throw CLI::RuntimeError(2);
    }
  }
}

std::string policy_label(const std::string &policy, float window_share) {
  char share[32];
  std::snprintf(share, sizeof share, "%g", static_cast<double>(window_share));
  return policy + ":" + share;
}

SpecSettings draft_model_spec(const SpecSettings &base, const vegas_model *draft) {
  SpecSettings m = base;
  m.label = "model";
  m.draft_model = draft;
  return m;
}

SpecSettings parse_policy_spec(const std::string &spec, const SpecSettings &base,
                               const char *command) {
  SpecSettings s = base;
  const size_t colon = spec.find(':');
  s.policy = spec.substr(0, colon);
  s.label = spec;
  if (colon != std::string::npos) {
    const std::string share = spec.substr(colon + 1);
    char *end = nullptr;
    const double v = std::strtod(share.c_str(), &end);
    if (share.empty() || *end != '\0' || !(v >= 0.0 && v <= 1.0)) {
      std::fprintf(stderr, "%s: policy \"%s\": the window share after ':' must be in [0, 1]\n",
                   command, spec.c_str());
      throw CLI::RuntimeError(2);
    }
    s.window_share = static_cast<float>(v);
    s.label = policy_label(s.policy, s.window_share);
  }
  if (s.policy.empty() || s.policy == "vanilla" || s.policy == "auto") {
    std::fprintf(stderr,
                 "%s: \"%s\" is not a selection policy (vegas, vegas-all, specextend, ...)\n",
                 command, spec.c_str());
    throw CLI::RuntimeError(2);
  }
  return s;
}

vegas_session_options session_options(const vegas_model_info &info, const Prompts &prompts,
                                      int32_t new_tokens, int32_t max_gamma,
                                      const std::string &kv_type) {
  size_t longest = 0;
  for (const auto &p : prompts) longest = std::max(longest, p.size());
  vegas_session_options so;
  vegas_session_options_init(&so);
  so.max_batch = std::max<int32_t>(static_cast<int32_t>(prompts.size()), 1);
  so.prefill_chunk = 2048;
  // Decoding is measured at the full batch: no sequence decodes (and finishes
  // early) while later prompts are still being prefilled.
  so.schedule = VEGAS_SCHEDULE_PREFILL_FIRST;
  so.kv_type = kv_type == "fp8" ? VEGAS_KV_FP8 : VEGAS_KV_DEFAULT;
  // Room for every sequence plus a round's drafts.
  so.kv_bytes = static_cast<uint64_t>(so.max_batch) *
                static_cast<uint64_t>(longest + static_cast<size_t>(new_tokens + max_gamma + 64)) *
                info.kv_bytes_per_token;
  return so;
}

vegas_session_options speculative_options(const vegas_session_options &base,
                                          const SpecSettings &spec) {
  vegas_session_options so = base;
  so.mode = VEGAS_MODE_VEGAS;
  so.policy = spec.policy.c_str();
  so.gamma = spec.gamma;
  so.ratio = spec.ratio;
  so.min_tokens = spec.min_tokens;
  so.window_share = spec.window_share;
  so.sink = spec.sink;
  so.score_kind = spec.score_kind == "logit" ? VEGAS_SCORE_LOGIT : VEGAS_SCORE_WEIGHT;
  so.tree_branches = spec.tree_branches;
  so.tree_depth = spec.tree_depth;
  so.draft_model = spec.draft_model;
  so.draft_window = spec.draft_window;
  return so;
}

double Measured::mean_tokens_per_s() const {
  return decode_s > 0 ? static_cast<double>(decode_tokens) / decode_s : 0.0;
}

double Measured::tokens_per_s() const {
  return steady() ? steady_tokens_per_s : mean_tokens_per_s();
}

vegas_sampling_options sampling_options(const SamplingArgs &a) {
  vegas_sampling_options sampling;
  vegas_sampling_options_init(&sampling);
  sampling.temperature = a.temperature;
  sampling.top_k = a.top_k;
  sampling.top_p = a.top_p;
  sampling.seed = a.seed;
  return sampling;
}

namespace {

// Submits every prompt for `new_tokens` tokens (seeds a.seed + i: the same in
// every mode); the sequence ids, in prompt order.
std::vector<int32_t> submit_prompts(vegas_session *session, const SamplingArgs &a,
                                    int32_t new_tokens, const Prompts &prompts,
                                    int32_t logprobs_seq) {
  vegas_sampling_options sampling = sampling_options(a);
  std::vector<int32_t> seqs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    sampling.seed = a.seed + i;
    vegas_request req;
    vegas_request_init(&req);
    req.prompt = prompts[i].data();
    req.n_prompt = prompts[i].size();
    req.sampling = &sampling;
    req.max_tokens = new_tokens;
    req.ignore_eos = 1;
    if (static_cast<int32_t>(i) == logprobs_seq) {
      req.logprobs = 1;
      req.top_logprobs = 2;
    }
    int32_t id = -1;
    check(vegas_session_submit(session, &req, &id), "submitting");
    seqs.push_back(id);
  }
  return seqs;
}

// Of `seqs`: how many have started (a token, or finished) and the tokens
// they generated.
std::pair<int64_t, int64_t> generated_by(const vegas_session *session,
                                         const std::vector<int32_t> &seqs) {
  int64_t started = 0, total = 0;
  for (int32_t id : seqs) {
    vegas_sequence_info si;
    si.struct_size = sizeof(si);
    check(vegas_sequence_get_info(session, id, &si), "info");
    started += si.n_generated > 0 || si.finish_reason != VEGAS_FINISH_NONE;
    total += si.n_generated;
  }
  return {started, total};
}

// The warm-up requests, run to the end and released; their tokens.
int64_t run_warmup(vegas_session *session, const SamplingArgs &a, int32_t tokens,
                   const Prompts &prompts) {
  const std::vector<int32_t> seqs = submit_prompts(session, a, tokens, prompts, -1);
  int32_t active = 1;
  while (active > 0) check(vegas_session_step(session, &active), "warm-up step");
  const int64_t generated = generated_by(session, seqs).second;
  for (int32_t id : seqs)
    check(vegas_sequence_release(session, id), "releasing a warm-up sequence");
  return generated;
}

// after - before, for the counters (gamma: the longest so far, kept).
vegas_session_stats stats_since(const vegas_session_stats &before,
                                const vegas_session_stats &after) {
  vegas_session_stats d = after;
  d.rounds -= before.rounds;
  d.drafted -= before.drafted;
  d.accepted -= before.accepted;
  d.committed -= before.committed;
  d.tokens_per_round =
      d.rounds > 0 ? static_cast<double>(d.committed) / static_cast<double>(d.rounds) : 0.0;
  d.draft_seconds -= before.draft_seconds;
  d.verify_seconds -= before.verify_seconds;
  d.select_seconds -= before.select_seconds;
  for (int i = 0; i < VEGAS_MAX_GAMMA; ++i) {
    d.drafted_at[i] -= before.drafted_at[i];
    d.accepted_at[i] -= before.accepted_at[i];
  }
  d.switches -= before.switches;
  return d;
}

vegas_session_stats session_stats(const vegas_session *session) {
  vegas_session_stats s{};
  s.struct_size = sizeof(s);
  check(vegas_session_get_stats(session, &s), "session stats");
  return s;
}

}  // namespace

Measured measure(vegas_model *model, const vegas_session_options &options, const SamplingArgs &a,
                 int32_t new_tokens, const Prompts &prompts, int32_t logprobs_seq,
                 int32_t warmup_tokens) {
  vegas_session_options so = options;
  if (warmup_tokens > 0) so.prefix_cache = 0;
  vegas_session *session = nullptr;
  check(vegas_session_create(model, &so, &session), "creating the session");
  const SessionPtr session_guard(session, vegas_session_free);
  Measured m;
  if (warmup_tokens > 0) {
    const double t_warmup = now_s();
    m.warmup_tokens = run_warmup(session, a, warmup_tokens, prompts);
    m.warmup_s = now_s() - t_warmup;
  }
  const vegas_session_stats stats_before = session_stats(session);
  const std::vector<int32_t> seqs = submit_prompts(session, a, new_tokens, prompts, logprobs_seq);
  auto generated = [&] { return generated_by(session, seqs); };
  // Prefill: steps until every sequence has its first token.
  const double t_prefill = now_s();
  int32_t active = 0;
  while (generated().first < static_cast<int64_t>(seqs.size()))
    check(vegas_session_step(session, &active), "prefill step");
  m.prefill_s = now_s() - t_prefill;
  const int64_t after_prefill = generated().second;

  std::vector<double> steps;
  std::vector<int64_t> committed;  // tokens generated so far, after each step
  std::vector<bool> full;          // every sequence decoding before and after the step
  // Seconds per token of each sequence that was active (a vanilla step, or a
  // chain of them, spread over the tokens each sequence got from it).
  std::vector<double> token_steps;
  while (active > 0) {
    const int32_t active_before = active;
    const int64_t before = committed.empty() ? after_prefill : committed.back();
    const double t0 = now_s();
    check(vegas_session_step(session, &active), "decode step");
    steps.push_back(now_s() - t0);
    committed.push_back(generated().second);
    const auto n = static_cast<int32_t>(seqs.size());
    full.push_back(active_before == n && active == n);
    const int64_t made = committed.back() - before;
    if (!full.back()) {
      m.tail_s += steps.back();
      m.tail_tokens += made;
    }
    if (made > 0) token_steps.push_back(steps.back() * active_before / static_cast<double>(made));
  }
  constexpr size_t kWarmupSteps = 3;
  if (steps.size() > 2 * kWarmupSteps) {
    double t = 0.0;
    for (size_t i = kWarmupSteps; i < steps.size(); ++i) t += steps[i];
    const int64_t tokens = committed.back() - committed[kWarmupSteps - 1];
    m.steady_tokens_per_s = t > 0 ? static_cast<double>(tokens) / t : 0.0;
  }
  double full_s = 0.0;
  int64_t full_tokens = 0;
  for (size_t i = kWarmupSteps; i < steps.size(); ++i)
    if (full[i]) {
      full_s += steps[i];
      full_tokens += committed[i] - committed[i - 1];
    }
  m.full_batch_tokens_per_s = full_s > 0 ? static_cast<double>(full_tokens) / full_s : 0.0;
  // The first decode step may still contain graph capture / warm-up: drop it from the median.
  std::vector<double> warm(steps.size() > 2 ? steps.begin() + 1 : steps.begin(), steps.end());
  m.median_step_s = median(warm);
  std::vector<double> warm_tokens(
      token_steps.size() > 2 ? token_steps.begin() + 1 : token_steps.begin(), token_steps.end());
  m.median_token_step_s = median(warm_tokens);
  for (double s : steps) m.decode_s += s;
  m.decode_steps = static_cast<int64_t>(steps.size());
  m.decode_tokens = generated().second - after_prefill;
  m.stats = stats_since(stats_before, session_stats(session));
  for (int32_t id : seqs) {
    std::vector<int32_t> ids(static_cast<size_t>(new_tokens));
    size_t n = 0;
    check(vegas_sequence_tokens(session, id, ids.data(), ids.size(), &n), "tokens");
    ids.resize(n);
    m.tokens.push_back(std::move(ids));
  }
  if (logprobs_seq >= 0 && logprobs_seq < static_cast<int32_t>(seqs.size())) {
    const int32_t id = seqs[static_cast<size_t>(logprobs_seq)];
    for (size_t i = 0; i < m.tokens[static_cast<size_t>(logprobs_seq)].size(); ++i) {
      vegas_token_logprobs lp;
      lp.struct_size = sizeof(lp);
      check(vegas_sequence_get_logprobs(session, id, static_cast<int64_t>(i), &lp), "logprobs");
      m.logprobs.push_back(lp);
    }
  }
  return m;
}

std::vector<double> acceptance_by_position(const vegas_session_stats &s) {
  std::vector<double> by_position;
  for (int32_t i = 0; i < s.gamma && i < VEGAS_MAX_GAMMA; ++i)
    by_position.push_back(s.drafted_at[i] > 0 ? static_cast<double>(s.accepted_at[i]) /
                                                    static_cast<double>(s.drafted_at[i])
                                              : 0.0);
  return by_position;
}

nlohmann::json speculative_json(const Measured &m) {
  const vegas_session_stats &s = m.stats;
  nlohmann::json j;
  j["rounds"] = s.rounds;
  j["drafted"] = s.drafted;
  j["accepted"] = s.accepted;
  j["committed"] = s.committed;
  j["tau"] = s.tokens_per_round;
  j["acceptance_by_position"] = acceptance_by_position(s);
  const double round_s = s.draft_seconds + s.verify_seconds + s.select_seconds;
  j["draft_seconds"] = s.draft_seconds;
  j["verify_seconds"] = s.verify_seconds;
  j["select_seconds"] = s.select_seconds;
  j["draft_share"] = round_s > 0 ? s.draft_seconds / round_s : 0.0;
  j["verify_share"] = round_s > 0 ? s.verify_seconds / round_s : 0.0;
  j["select_share"] = round_s > 0 ? s.select_seconds / round_s : 0.0;
  j["switches"] = s.switches;  // automatic γ / ratio changes (auto mode)
  // Tokens the rounds committed, of all decoded ones (below 1 in --mode auto,
  // where the rest came from vanilla steps).
  j["round_token_share"] =
      m.decode_tokens > 0 ? static_cast<double>(s.committed) / static_cast<double>(m.decode_tokens)
                          : 0.0;
  return j;
}

}  // namespace vegas_cli
