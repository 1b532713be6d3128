// Sessions, sequences and the one-call vegas_generate of the C ABI.
#include <cstdlib>
#include <cstring>
#include <string>

#include "api/api_guard.h"
#include "api/api_handles.h"

using vegas::api::guarded;
using vegas::api::read_options;
using vegas::api::require_non_null;
using vegas::api::write_buffer;

namespace {

vegas::Session &session_of(vegas_session *session) {
  require_non_null(session, "session");
  return *session->impl;
}

const vegas::Session &session_of(const vegas_session *session) {
  require_non_null(session, "session");
  return *session->impl;
}

// The tuning profile a session reads (vegas_session_options.profile_path): a
// named one always (a bad file fails the create even when no knob is auto),
// the model directory's or the built-in one only when a knob is auto or the
// mode is (which reads the buckets' "mode").
std::shared_ptr<const vegas::TuningProfile> session_profile(const vegas_session_options &o,
                                                            const vegas_model &model,
                                                            const vegas::AutoKnobs &autos) {
  if (o.profile_path != nullptr && o.profile_path[0] == '\0')
    vegas::fail(VEGAS_ERR_INVALID_ARGUMENT, "profile_path is empty (NULL = the default profile)");
  if (o.profile_path == nullptr && !autos.any() && o.mode != VEGAS_MODE_AUTO) return nullptr;
  const char *backend = model.impl->backend().kind() == vegas::BackendKind::kCuda ? "cuda" : "cpu";
  return vegas::TuningProfile::resolve(o.profile_path != nullptr ? o.profile_path : "", model.dir,
                                       backend);
}

vegas::SessionParams to_session_params(const vegas_session_options &o, const vegas_model &model) {
  if (o.mode != VEGAS_MODE_VANILLA && o.mode != VEGAS_MODE_VEGAS && o.mode != VEGAS_MODE_AUTO)
    vegas::fail(VEGAS_ERR_INVALID_ARGUMENT, "unknown mode " + std::to_string(o.mode));
  vegas::SessionParams p;
  p.kv_bytes = o.kv_bytes;
  p.page_size = o.page_size;
  p.max_batch = o.max_batch;
  p.prefill_chunk = o.prefill_chunk;
  if (o.schedule != VEGAS_SCHEDULE_INTERLEAVE && o.schedule != VEGAS_SCHEDULE_PREFILL_FIRST)
    vegas::fail(VEGAS_ERR_INVALID_ARGUMENT, "unknown schedule " + std::to_string(o.schedule));
  p.prefill_first = o.schedule == VEGAS_SCHEDULE_PREFILL_FIRST;
  if (o.prefix_cache != 0 && o.prefix_cache != 1)
    vegas::fail(VEGAS_ERR_INVALID_ARGUMENT,
                "prefix_cache " + std::to_string(o.prefix_cache) + " is not 0 or 1");
  p.prefix_cache = o.prefix_cache == 1;
  if (o.kv_type != VEGAS_KV_DEFAULT && o.kv_type != VEGAS_KV_FP8)
    vegas::fail(VEGAS_ERR_INVALID_ARGUMENT, "unknown kv_type " + std::to_string(o.kv_type));
  p.kv_fp8 = o.kv_type == VEGAS_KV_FP8;
  // VEGAS_VANILLA_CHAIN=1..16: vanilla steps per chain (A/B timing; 1 = off).
  if (const char *env = std::getenv("VEGAS_VANILLA_CHAIN")) {
    const int chain = std::atoi(env);
    if (chain >= 1 && chain <= 16) p.vanilla_chain = chain;
  }
  p.speculative = o.mode == VEGAS_MODE_VEGAS || o.mode == VEGAS_MODE_AUTO;
  p.auto_mode = o.mode == VEGAS_MODE_AUTO;
  if (p.speculative) {
    // NULL: in auto mode the hybrid with prompt lookup, so that the session
    // weighs vanilla steps, sparse drafting and lookup (ModeChooser), where
    // neither a draft model nor token trees rule lookup out.
    const bool trees = o.tree_branches > 1 && o.tree_depth > 0;
    const bool lookup_default = p.auto_mode && o.draft_model == nullptr && !trees;
    p.spec.policy = o.policy != nullptr ? o.policy : lookup_default ? "vegas+lookup" : "vegas";
    p.spec.gamma = o.gamma;
    // 0 / "auto": from the tuning profile, γ and ratio refined at run time.
    p.spec.autos.gamma = o.gamma == 0;
    p.spec.autos.ratio = o.ratio == 0.0f;
    p.spec.autos.policy = p.spec.policy == "auto";
    vegas::SelectionOptions &sel = p.spec.selection;
    sel.ratio = o.ratio;
    sel.min_tokens = o.min_tokens;
    sel.window_share = o.window_share;
    sel.sink = o.sink;
    sel.p = o.top_p_mass;
    if (o.score_kind != VEGAS_SCORE_WEIGHT && o.score_kind != VEGAS_SCORE_LOGIT)
      vegas::fail(VEGAS_ERR_INVALID_ARGUMENT, "unknown score_kind " + std::to_string(o.score_kind));
    sel.score_kind = static_cast<vegas::ScoreKind>(o.score_kind);
    sel.user = o.select_policy;
    p.spec.tree.branches = o.tree_branches;
    p.spec.tree.branch_depth = o.tree_depth;
    if (o.draft_model != nullptr) {
      if (!o.draft_model->impl)
        vegas::fail(VEGAS_ERR_INVALID_ARGUMENT, "draft_model is not a loaded model");
      p.draft_model = o.draft_model->impl;
      p.spec.draft_model = true;
    }
    p.spec.draft_window = o.draft_window;
    if (p.spec.policy == "user" && o.select_policy == nullptr)
      vegas::fail(VEGAS_ERR_INVALID_ARGUMENT, "policy \"user\" needs select_policy");
  }
  p.spec.profile = session_profile(o, model, p.spec.autos);
  return p;
}

vegas::SamplingParams to_sampling(const vegas_sampling_options *in) {
  vegas_sampling_options o;
  vegas_sampling_options_init(&o);
  read_options(in, &o, "vegas_sampling_options");
  vegas::SamplingParams s;
  s.temperature = o.temperature;
  s.top_k = o.top_k;
  s.top_p = o.top_p;
  s.min_p = o.min_p;
  s.repetition_penalty = o.repetition_penalty;
  s.presence_penalty = o.presence_penalty;
  s.frequency_penalty = o.frequency_penalty;
  s.penalty_last_n = o.penalty_last_n;
  s.seed = o.seed;
  return s;
}

vegas::SequenceRequest to_request(const vegas_request *in) {
  require_non_null(in, "request");
  vegas_request r;
  vegas_request_init(&r);
  read_options(in, &r, "vegas_request");
  if (r.n_prompt == 0) vegas::fail(VEGAS_ERR_INVALID_ARGUMENT, "request.n_prompt is 0");
  require_non_null(r.prompt, "request.prompt");
  if (r.n_stop_ids > 0) require_non_null(r.stop_ids, "request.stop_ids");
  if (r.n_stop_strings > 0) require_non_null(r.stop_strings, "request.stop_strings");
  vegas::SequenceRequest out;
  out.prompt.assign(r.prompt, r.prompt + r.n_prompt);
  out.sampling = to_sampling(r.sampling);
  out.max_tokens = r.max_tokens;
  out.ignore_eos = r.ignore_eos != 0;
  if (r.n_stop_ids > 0) out.stop_ids.assign(r.stop_ids, r.stop_ids + r.n_stop_ids);
  for (size_t i = 0; i < r.n_stop_strings; ++i) {
    if (r.stop_strings[i] == nullptr)
      vegas::fail(VEGAS_ERR_INVALID_ARGUMENT,
                  "request.stop_strings[" + std::to_string(i) + "] is NULL");
    if (r.stop_strings[i][0] == '\0')
      vegas::fail(VEGAS_ERR_INVALID_ARGUMENT,
                  "request.stop_strings[" + std::to_string(i) + "] is empty");
    out.stop_strings.emplace_back(r.stop_strings[i]);
  }
  out.on_token = r.on_token;
  out.user_data = r.user_data;
  if (r.logprobs < VEGAS_LOGPROBS_OFF || r.logprobs > VEGAS_LOGPROBS_PROCESSED)
    vegas::fail(VEGAS_ERR_INVALID_ARGUMENT, "request.logprobs " + std::to_string(r.logprobs) +
                                                " is not a vegas_logprobs_kind (0, 1 or 2)");
  out.logprobs = r.logprobs != VEGAS_LOGPROBS_OFF;
  out.processed_logprobs = r.logprobs == VEGAS_LOGPROBS_PROCESSED;
  out.top_logprobs = r.top_logprobs;
  if (!out.logprobs && r.top_logprobs != 0)
    vegas::fail(VEGAS_ERR_INVALID_ARGUMENT, "request.top_logprobs is set but logprobs is 0");
  return out;
}

void check_not_in_callback(const vegas_session *session, const char *what) {
  if (session != nullptr && session->impl->in_callback())
    vegas::fail(VEGAS_ERR_WRONG_STATE, std::string(what) + " called from a token callback");
}

}  // namespace

extern "C" {

VEGAS_API void vegas_session_options_init_sized(vegas_session_options *options, size_t size) {
  vegas_session_options o{};
  o.kv_bytes = 0;
  o.page_size = 16;
  o.max_batch = 64;
  o.prefill_chunk = 512;
  o.mode = VEGAS_MODE_VANILLA;
  o.policy = nullptr;
  o.gamma = 6;
  o.ratio = 0.07f;
  o.min_tokens = 256;
  o.window_share = 0.5f;
  o.score_kind = VEGAS_SCORE_WEIGHT;
  o.sink = 16;
  o.top_p_mass = 0.9f;
  o.select_policy = nullptr;
  o.schedule = VEGAS_SCHEDULE_INTERLEAVE;
  o.profile_path = nullptr;
  o.prefix_cache = 1;
  o.kv_type = VEGAS_KV_DEFAULT;
  o.tree_branches = 1;
  o.tree_depth = 0;
  o.draft_model = nullptr;
  o.draft_window = 0;
  vegas::abi::init_struct(o, options, size);
}

VEGAS_API void vegas_sampling_options_init_sized(vegas_sampling_options *options, size_t size) {
  vegas_sampling_options o{};
  o.temperature = 0.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.0f;
  o.repetition_penalty = 1.0f;
  o.presence_penalty = 0.0f;
  o.frequency_penalty = 0.0f;
  o.penalty_last_n = 64;
  o.seed = 0;
  vegas::abi::init_struct(o, options, size);
}

VEGAS_API void vegas_request_init_sized(vegas_request *request, size_t size) {
  vegas_request r{};
  r.max_tokens = 128;
  vegas::abi::init_struct(r, request, size);
}

VEGAS_API void vegas_generate_options_init_sized(vegas_generate_options *options, size_t size) {
  vegas_generate_options o{};
  o.max_tokens = 128;
  vegas::abi::init_struct(o, options, size);
}

VEGAS_API vegas_status vegas_session_create(vegas_model *model,
                                            const vegas_session_options *options,
                                            vegas_session **out) {
  return guarded([&] {
    require_non_null(model, "model");
    require_non_null(out, "out");
    vegas_session_options o;
    vegas_session_options_init(&o);
    read_options(options, &o, "vegas_session_options");
    auto handle = std::make_unique<vegas_session>();
    handle->impl = std::make_unique<vegas::Session>(model->impl, to_session_params(o, *model));
    *out = handle.release();
  });
}

VEGAS_API void vegas_session_free(vegas_session *session) {
  if (session == nullptr) return;
  if (session->impl->in_callback()) {
    vegas::api::set_last_error("vegas_session_free called from a token callback: ignored");
    return;
  }
  delete session;
}

VEGAS_API vegas_status vegas_session_submit(vegas_session *session, const vegas_request *request,
                                            int32_t *seq_id) {
  return guarded([&] {
    vegas::Session &s = session_of(session);
    require_non_null(seq_id, "seq_id");
    const int32_t id = s.submit(to_request(request));
    *seq_id = id;
  });
}

VEGAS_API vegas_status vegas_session_step(vegas_session *session, int32_t *n_active) {
  return guarded([&] {
    vegas::Session &s = session_of(session);
    check_not_in_callback(session, "vegas_session_step");
    const int32_t n = s.step();
    if (n_active != nullptr) *n_active = n;
  });
}

VEGAS_API vegas_status vegas_session_run(vegas_session *session) {
  return guarded([&] {
    vegas::Session &s = session_of(session);
    check_not_in_callback(session, "vegas_session_run");
    s.run();
  });
}

VEGAS_API vegas_status vegas_session_cancel(vegas_session *session, int32_t seq_id) {
  return guarded([&] { session_of(session).cancel(seq_id); });
}

VEGAS_API vegas_status vegas_sequence_get_info(const vegas_session *session, int32_t seq_id,
                                               vegas_sequence_info *out) {
  return guarded([&] {
    const vegas::Sequence &seq = session_of(session).sequence(seq_id);
    require_non_null(out, "out");
    vegas_sequence_info info{};
    info.finish_reason = seq.finish;
    info.status = seq.status;
    info.n_prompt = seq.n_prompt();
    info.n_generated = seq.n_generated();
    info.rounds = seq.stats.rounds;
    info.drafted = seq.stats.drafted;
    info.accepted = seq.stats.accepted;
    info.tokens_per_round =
        seq.stats.rounds > 0 ? static_cast<double>(seq.stats.committed) / seq.stats.rounds : 0.0;
    info.prefill_seconds = seq.stats.prefill_seconds;
    info.decode_seconds = seq.stats.decode_seconds;
    info.gamma = seq.stats.gamma;
    info.ratio = seq.stats.ratio;
    info.switches = seq.stats.switches;
    vegas::abi::write_struct(info, out, "vegas_sequence_info");
  });
}

VEGAS_API vegas_status vegas_session_get_cache_stats(const vegas_session *session,
                                                     int64_t *hit_tokens, int64_t *evicted_pages) {
  return guarded([&] {
    const vegas::KvPool &pool = session_of(session).kv_pool();
    if (hit_tokens != nullptr) *hit_tokens = pool.hit_tokens();
    if (evicted_pages != nullptr) *evicted_pages = pool.evicted_pages();
  });
}

VEGAS_API vegas_status vegas_session_get_stats(const vegas_session *session,
                                               vegas_session_stats *out) {
  return guarded([&] {
    const vegas::Session &s = session_of(session);
    require_non_null(out, "out");
    vegas::abi::check_struct_size(out->struct_size, "vegas_session_stats");
    vegas_session_stats st{};
    if (const vegas::SpeculativeDecoder *spec = s.speculative()) {
      const vegas::SpeculativeTotals &t = spec->totals();
      st.gamma = spec->reported_gamma();
      st.switches = spec->tuning().switches();
      st.rounds = t.rounds;
      st.drafted = t.drafted;
      st.accepted = t.accepted;
      st.committed = t.committed;
      st.tokens_per_round = t.rounds > 0 ? static_cast<double>(t.committed) / t.rounds : 0.0;
      st.draft_seconds = t.draft_seconds;
      st.verify_seconds = t.verify_seconds;
      st.select_seconds = t.select_seconds;
      for (size_t i = 0; i < t.accepted_at.size() && i < VEGAS_MAX_GAMMA; ++i) {
        st.accepted_at[i] = t.accepted_at[i];
        st.drafted_at[i] = t.drafted_at[i];
      }
    }
    vegas::abi::write_struct(st, out, "vegas_session_stats");
  });
}

VEGAS_API vegas_status vegas_session_get_switch(const vegas_session *session, int64_t index,
                                                vegas_switch_info *out) {
  return guarded([&] {
    const vegas::Session &s = session_of(session);
    require_non_null(out, "out");
    vegas::abi::check_struct_size(out->struct_size, "vegas_switch_info");
    const vegas::SpeculativeDecoder *spec = s.speculative();
    const int64_t count = spec != nullptr ? spec->tuning().switches() : 0;
    const vegas::SwitchRecord *r = spec != nullptr ? spec->tuning().switch_at(index) : nullptr;
    if (r == nullptr)
      vegas::fail(VEGAS_ERR_NOT_FOUND, "no switch " + std::to_string(index) +
                                           ": the session made " + std::to_string(count) +
                                           " and keeps the last " +
                                           std::to_string(vegas::kSwitchLogCapacity));
    vegas_switch_info info{};
    info.seq_id = r->seq_id;
    info.round = r->event.round;
    info.from_gamma = r->event.from.gamma;
    info.to_gamma = r->event.to.gamma;
    info.from_ratio = r->event.from.ratio;
    info.to_ratio = r->event.to.ratio;
    info.tau_ema = r->event.tau_ema;
    vegas::abi::write_struct(info, out, "vegas_switch_info");
  });
}

VEGAS_API vegas_status vegas_sequence_get_logprobs(const vegas_session *session, int32_t seq_id,
                                                   int64_t index, vegas_token_logprobs *out) {
  return guarded([&] {
    const vegas::Sequence &seq = session_of(session).sequence(seq_id);
    require_non_null(out, "out");
    vegas::abi::check_struct_size(out->struct_size, "vegas_token_logprobs");
    if (!seq.req.logprobs)
      vegas::fail(VEGAS_ERR_WRONG_STATE,
                  "sequence " + std::to_string(seq_id) + " was submitted without request.logprobs");
    if (index < 0 || index >= static_cast<int64_t>(seq.logprobs.size()))
      vegas::fail(VEGAS_ERR_NOT_FOUND, "no generated token " + std::to_string(index) +
                                           ": sequence " + std::to_string(seq_id) + " has " +
                                           std::to_string(seq.logprobs.size()));
    const vegas::TokenLogprobs &lp = seq.logprobs[static_cast<size_t>(index)];
    vegas_token_logprobs info{};
    info.token = lp.token;
    info.logprob = lp.logprob;
    info.n_top = static_cast<int32_t>(lp.top_ids.size());
    for (size_t i = 0; i < lp.top_ids.size() && i < VEGAS_MAX_TOP_LOGPROBS; ++i) {
      info.top_ids[i] = lp.top_ids[i];
      info.top_logprobs[i] = lp.top_logprobs[i];
    }
    vegas::abi::write_struct(info, out, "vegas_token_logprobs");
  });
}

VEGAS_API vegas_status vegas_sequence_tokens(const vegas_session *session, int32_t seq_id,
                                             int32_t *ids, size_t capacity, size_t *n_ids) {
  return guarded([&] {
    const vegas::Sequence &seq = session_of(session).sequence(seq_id);
    const size_t n = static_cast<size_t>(seq.n_generated());
    write_buffer(seq.tokens.data() + seq.n_prompt(), n, ids, capacity, n_ids,
                 "vegas_sequence_tokens");
  });
}

VEGAS_API vegas_status vegas_sequence_text(const vegas_session *session, int32_t seq_id, char *text,
                                           size_t capacity, size_t *n_bytes) {
  return guarded([&] {
    const vegas::Sequence &seq = session_of(session).sequence(seq_id);
    write_buffer(seq.text.data(), seq.text.size(), text, capacity, n_bytes, "vegas_sequence_text");
  });
}

VEGAS_API vegas_status vegas_sequence_release(vegas_session *session, int32_t seq_id) {
  return guarded([&] { session_of(session).release(seq_id); });
}

VEGAS_API vegas_status vegas_generate(vegas_model *model, const char *prompt,
                                      const vegas_generate_options *options, char *text,
                                      size_t capacity, size_t *n_bytes) {
  return guarded([&] {
    require_non_null(model, "model");
    require_non_null(prompt, "prompt");
    require_non_null(n_bytes, "n_bytes");
    vegas_generate_options o;
    vegas_generate_options_init(&o);
    read_options(options, &o, "vegas_generate_options");
    vegas_session_options so;
    vegas_session_options_init(&so);
    read_options(o.session, &so, "vegas_session_options");
    vegas::Session session(model->impl, to_session_params(so, *model));
    vegas::SequenceRequest request;
    const std::vector<int32_t> ids =
        model->impl->tokenizer().encode(prompt, /*parse_special=*/true, /*add_special=*/true);
    request.prompt.assign(ids.begin(), ids.end());
    request.sampling = to_sampling(o.sampling);
    request.max_tokens = o.max_tokens;
    request.on_token = o.on_token;
    request.user_data = o.user_data;
    const int32_t id = session.submit(std::move(request));
    session.run();
    const vegas::Sequence &seq = session.sequence(id);
    if (seq.finish == VEGAS_FINISH_ERROR)
      vegas::fail(seq.status, std::string("generation failed: ") + vegas_status_name(seq.status));
    write_buffer(seq.text.data(), seq.text.size(), text, capacity, n_bytes, "vegas_generate");
  });
}

}  // extern "C"
