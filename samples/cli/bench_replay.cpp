#include "bench_replay.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

#include "cli_util.h"

namespace vegas_cli {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct FirstToken {
  double at = 0.0;  // when the first token was committed (0: not yet)
};

int32_t on_token(int32_t, int32_t, const char *, size_t, void *user_data) {
  auto *first = static_cast<FirstToken *>(user_data);
  if (first->at == 0.0) first->at = now_seconds();
  return 0;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One pass over the requests in one session; ttft and total in seconds.
nlohmann::json replay_once(vegas_model *model, const vegas_session_options &so,
                           const std::vector<std::vector<int32_t>> &prompts, const SamplingArgs &a,
                           int32_t new_tokens) {
  vegas_session *session = nullptr;
  check(vegas_session_create(model, &so, &session), "creating the session");
  const SessionPtr guard(session, vegas_session_free);
  const vegas_sampling_options sampling = sampling_options(a);
  std::vector<double> ttft, total;
  for (const std::vector<int32_t> &prompt : prompts) {
    FirstToken first;
    vegas_request req;
    vegas_request_init(&req);
    req.prompt = prompt.data();
    req.n_prompt = prompt.size();
    req.sampling = &sampling;
    req.max_tokens = new_tokens;
    req.ignore_eos = 1;
    req.on_token = on_token;
    req.user_data = &first;
    const double t0 = now_seconds();
    int32_t id = -1;
    check(vegas_session_submit(session, &req, &id), "submitting");
    check(vegas_session_run(session), "running");
    const double t1 = now_seconds();
    check(vegas_sequence_release(session, id), "releasing");
    ttft.push_back(first.at - t0);
    total.push_back(t1 - t0);
  }
  int64_t hit = 0, evicted = 0;
  check(vegas_session_get_cache_stats(session, &hit, &evicted), "cache stats");
  return {{"ttft_median_s", median(ttft)},
          {"total_median_s", median(total)},
          {"ttft_s", ttft},
          {"total_s", total},
          {"hit_tokens", hit},
          {"evicted_pages", evicted}};
}

}  // namespace

nlohmann::json edit_replay(vegas_model *model, const vegas_model_info &info,
                           vegas_session_options so, const std::vector<int32_t> &file,
                           const SamplingArgs &sampling, int32_t new_tokens,
                           const ReplayArgs &replay) {
  // Request i: the file with its last `edited` tokens replaced by others
  // (ids past the special tokens, a fixed sequence per request).
  std::mt19937_64 rng(sampling.seed);
  std::uniform_int_distribution<int32_t> id(16, info.vocab_size - 1);
  const size_t keep = file.size() > static_cast<size_t>(replay.edited)
                          ? file.size() - static_cast<size_t>(replay.edited)
                          : 0;
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < replay.requests; ++i) {
    std::vector<int32_t> p(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(keep));
    for (int32_t k = 0; k < replay.edited; ++k) p.push_back(id(rng));
    prompts.push_back(std::move(p));
  }
  // Room for two files: the running request and the cached one it shares.
  so.kv_bytes =
      std::max<uint64_t>(so.kv_bytes, 2 * (file.size() + static_cast<uint64_t>(new_tokens) + 64) *
                                          info.kv_bytes_per_token);
  so.prefix_cache = 1;
  nlohmann::json cached = replay_once(model, so, prompts, sampling, new_tokens);
  so.prefix_cache = 0;
  nlohmann::json fresh = replay_once(model, so, prompts, sampling, new_tokens);
  const double on = cached["ttft_median_s"].get<double>(),
               off = fresh["ttft_median_s"].get<double>();
  return {{"requests", replay.requests},
          {"file_tokens", file.size()},
          {"edited_tokens", replay.edited},
          {"new_tokens", new_tokens},
          {"cache_on", cached},
          {"cache_off", fresh},
          {"ttft_speedup", on > 0 ? off / on : 0.0}};
}

}  // namespace vegas_cli
