// The phases of one speculative round on the CUDA backend (issue P0-5), each
// against the vanilla decode step of the same shape and against its own byte
// floor (DESIGN §7). Usage:
//   bench_cuda_phases [model_dir] [qwen3-8b config.json]
// VEGAS_PHASE_SHAPES="8192x16,8192x64,16384x32" (embedded model) and
// VEGAS_PHASE_SYNTHETIC="32768x4" (the config's shapes, random weights in the
// format VEGAS_PHASE_WEIGHTS names: bf16, q4_k_m, fp8, ...) pick the shapes,
// a suffix f for the fp8 KV cache ("16384x16f"); VEGAS_PHASE_GAMMA (6),
// VEGAS_PHASE_RATIO (0.07) and VEGAS_PHASE_POLICY (vegas, window share 0.5) the round.
//
// For each shape, on a KV cache of random values:
//   vanilla  one row per sequence at position `context` (greedy, graph);
//   verify   gamma + 1 rows per sequence with the policy's score capture,
//            without the device selection that ends the pass;
//   select   the selection kernels alone (their CUDA events inside the pass);
//   pass     verify + select: what a round's verification call runs (its
//            wall time is that call's; verify's wall is it less select's
//            device time);
//   draft    one row per sequence attending to the set that verify selected
//            (device_sparse_key, graph);
//   draftchain the round's gamma draft passes in one forward_draft_chain call
//            (each fed the previous draws on the device), wall time per pass.
// "device" is the step replayed back to back and timed with CUDA events
// (median), the host's share left out; "wall" is the host clock around one
// call that ends in its sync (median): for verify the call a round makes,
// forward_candidates (top-k 20 rows; with VEGAS_CUDA_CANDIDATES=0
// forward() with every logit row downloaded). Floors: weights once, plus each
// sequence's KV rows read (verify: context + gamma + 1; draft: the selected
// set and its own rows), plus the captured scores written (verify) or read
// (select). One JSON object per shape on stdout after the table.
// VEGAS_PHASE_PROFILE=vanilla|verify|draft runs 5 passes of that phase alone
// inside cudaProfilerStart/Stop, for `ncu --profile-from-start off`.
#include <cuda_profiler_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_context.h"
#include "decode_rows.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/weight_store.h"
#include "sampling/sampling.h"
#include "select/select_policy.h"
#include "synthetic_weights.h"

using namespace vegas;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double wall_median(int n, F &&call) {
  std::vector<double> t;
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(t);
}

struct Shape {
  int context = 0, batch = 0;
  bool fp8 = false;  // the fp8 KV cache (ContextParams::kv_fp8)
};

std::vector<Shape> shapes_from_env(const char *name) {
  std::vector<Shape> out;
  const char *env = std::getenv(name);
  std::istringstream list(env ? env : "");
  for (std::string item; std::getline(list, item, ',');) {
    Shape s;
    int used = 0;
    const bool parsed = std::sscanf(item.c_str(), "%dx%d%n", &s.context, &s.batch, &used) == 2;
    const std::string suffix = parsed ? item.substr(static_cast<size_t>(used)) : "";
    s.fp8 = suffix == "f";
    if (parsed && s.context > 0 && s.batch > 0 && (suffix.empty() || s.fp8))
      out.push_back(s);
    else if (!item.empty())
      std::fprintf(stderr, "bench_cuda_phases: ignoring bad shape '%s' in %s\n", item.c_str(),
                   name);
  }
  return out;
}

double env_number(const char *name, double fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::atof(v) : fallback;
}

struct Phase {
  double device_s = 0, wall_s = 0, floor_s = 0;
};

struct RoundSetup {
  int gamma = 6;
  double ratio = 0.07;
  std::string policy = "vegas";
};

void report(const std::string &model_name, const Shape &sh, const RoundSetup &r,
            const DevicePlan &plan, const Phase &vanilla, const Phase &verify, const Phase &select,
            const Phase &pass, const Phase &draft, const Phase &chain) {
  auto line = [&](const char *name, const Phase &p) {
    std::printf("%-22s %6d x %-3d %-9s %9.3f %9.3f %9.3f %7.1f%% %8.3f %8.3f\n", model_name.c_str(),
                sh.context, sh.batch, name, p.device_s * 1e3, p.wall_s * 1e3, p.floor_s * 1e3,
                100 * p.floor_s / p.device_s, p.device_s / vanilla.device_s,
                p.wall_s > 0 ? p.wall_s / vanilla.wall_s : 0.0);
  };
  line("vanilla", vanilla);
  line("verify", verify);
  line("select", select);
  line("pass", pass);
  line("draft", draft);
  if (chain.wall_s > 0) line("draftchain", chain);
  std::printf(
      "{\"model\":\"%s\",\"context\":%d,\"batch\":%d,\"gamma\":%d,\"ratio\":%.3f,"
      "\"policy\":\"%s\",\"selected\":%d,"
      "\"vanilla_device_ms\":%.4f,\"vanilla_wall_ms\":%.4f,\"vanilla_floor_ms\":%.4f,"
      "\"verify_device_ms\":%.4f,\"verify_wall_ms\":%.4f,\"verify_floor_ms\":%.4f,"
      "\"select_device_ms\":%.4f,\"select_floor_ms\":%.4f,"
      "\"pass_device_ms\":%.4f,\"pass_wall_ms\":%.4f,"
      "\"draft_device_ms\":%.4f,\"draft_wall_ms\":%.4f,\"draft_floor_ms\":%.4f,"
      "\"draft_chain_wall_ms_per_pass\":%.4f,"
      "\"verify_over_vanilla\":%.3f,\"verify_over_vanilla_wall\":%.3f,"
      "\"select_over_vanilla\":%.3f,\"draft_over_vanilla\":%.3f,\"draft_over_vanilla_wall\":%.3f}"
      "\n",
      model_name.c_str(), sh.context, sh.batch, r.gamma, r.ratio, r.policy.c_str(),
      plan.head + plan.tail + plan.scored, vanilla.device_s * 1e3, vanilla.wall_s * 1e3,
      vanilla.floor_s * 1e3, verify.device_s * 1e3, verify.wall_s * 1e3, verify.floor_s * 1e3,
      select.device_s * 1e3, select.floor_s * 1e3, pass.device_s * 1e3, pass.wall_s * 1e3,
      draft.device_s * 1e3, draft.wall_s * 1e3, draft.floor_s * 1e3, chain.wall_s * 1e3,
      verify.device_s / vanilla.device_s, verify.wall_s / vanilla.wall_s,
      select.device_s / vanilla.device_s, draft.device_s / vanilla.device_s,
      draft.wall_s / vanilla.wall_s);
  std::fflush(stdout);
}

void bench_round(BackendModel &model, const std::string &model_name, const Shape &sh,
                 const RoundSetup &r, double bandwidth) {
  const ModelConfig &c = model.config();
  const int page = 16, gamma = r.gamma, B = sh.batch, ctx_len = sh.context;
  const int pages_per_seq = (ctx_len + gamma + 2 + page - 1) / page;
  ContextParams p;
  p.page_size = page;
  p.num_pages = pages_per_seq * B;
  p.max_rows = std::max(B * (gamma + 1), 64);
  p.kv_fp8 = sh.fp8;
  auto ctx = model.create_context(p);
  auto *cctx = dynamic_cast<cuda::CudaContext *>(ctx.get());
  cctx->randomize_kv(99);

  SelectionOptions opts;
  opts.ratio = static_cast<float>(r.ratio);
  SelectionShape shape;
  shape.max_candidates = ctx_len + gamma + 2;
  shape.max_rows = gamma + 1;
  shape.n_heads = c.n_heads;
  shape.n_kv_heads = c.n_kv_heads;
  shape.head_dim = c.head_dim;
  auto policy = make_selection_policy(r.policy, opts, shape);
  const int n_cand = ctx_len + 1;  // the verify pass's candidates: [0, context]
  DevicePlan plan;
  if (!policy->device_plan(n_cand, &plan)) {
    std::fprintf(stderr, "bench_cuda_phases: policy '%s' has no device form\n", r.policy.c_str());
    std::exit(1);
  }
  std::vector<int32_t> cap_rows = {0};
  if (policy->needs().score_rows == ScoreRows::kAll)
    for (int k = 1; k <= gamma; ++k) cap_rows.push_back(k);
  else if (gamma > 0)
    cap_rows.push_back(gamma);
  if (plan.scored == 0) cap_rows.clear();

  std::vector<std::vector<int32_t>> verify_tokens(B);
  std::vector<ScoreCapture> caps(B);
  std::vector<DeviceSelection> sels(B);
  bench::DecodeRows rows_in;
  bench::make_decode_rows(B, pages_per_seq, ctx_len, c.vocab_size, &rows_in);
  const ForwardBatch &vanilla = rows_in.batch;
  ForwardBatch verify, draft;
  for (int s = 0; s < B; ++s) {
    for (int k = 0; k <= gamma; ++k) verify_tokens[s].push_back((s * 31 + k * 977) % c.vocab_size);
    const SeqRows &row = vanilla.seqs[s];

    SeqRows v = row;
    v.tokens = verify_tokens[s].data();
    v.n_tokens = gamma + 1;
    v.logits = SeqRows::Logits::kAll;
    caps[s].n_candidates = n_cand;
    caps[s].rows = cap_rows.data();
    caps[s].n_rows = static_cast<int32_t>(cap_rows.size());
    sels[s].key = s;
    sels[s].head = plan.head;
    sels[s].tail = plan.tail;
    sels[s].scored = plan.scored;
    sels[s].weight = plan.weight;
    v.capture = &caps[s];
    v.device_select = &sels[s];
    verify.seqs.push_back(v);

    SeqRows d = row;
    d.start_pos = ctx_len + 1;
    d.device_sparse_key = s;
    d.device_sparse_span = plan.head + plan.tail + plan.scored + (d.start_pos + 1 - n_cand);
    draft.seqs.push_back(d);
  }
  SamplingParams greedy;
  std::vector<RowSampling> rules(B, RowSampling{&greedy, 0});
  std::vector<int32_t> out(B);
  const int reps = 30;
  const double kv_token = static_cast<double>(model.kv_bytes_per_token(sh.fp8));
  const double weights = static_cast<double>(model.weight_bytes());

  if (const char *only = std::getenv("VEGAS_PHASE_PROFILE")) {
    // For `ncu --profile-from-start off`: 5 passes of one phase between
    // cudaProfilerStart and Stop (draft after one verify, which selects).
    const std::string phase = only;
    if (phase == "draft") ctx->forward(verify);
    cudaProfilerStart();
    for (int i = 0; i < 5; ++i) {
      if (phase == "verify")
        ctx->forward(verify);
      else
        ctx->forward_sample(phase == "draft" ? draft : vanilla, rules.data(), out.data());
    }
    cudaProfilerStop();
    return;
  }
  Phase van;
  for (int i = 0; i < 3; ++i) ctx->forward_sample(vanilla, rules.data(), out.data());
  van.wall_s = wall_median(reps, [&] { ctx->forward_sample(vanilla, rules.data(), out.data()); });
  van.device_s = cctx->replay_seconds(vanilla, reps);
  van.floor_s = (weights + double(B) * (ctx_len + 1) * kv_token) / bandwidth;

  // Verify: the wall time of the call a round makes, then the device time of
  // the pass (selection included) replayed back to back.
  const std::vector<int32_t> cand_k(size_t(B) * (gamma + 1), 20);
  std::vector<LogitCandidates> cands;
  auto verify_call = [&] {
    if (!ctx->forward_candidates(verify, cand_k.data(), &cands)) ctx->forward(verify);
  };
  for (int i = 0; i < 3; ++i) verify_call();
  ctx->take_select_seconds();
  Phase ver, sel, pass;
  pass.wall_s = wall_median(reps, verify_call);
  sel.device_s = ctx->take_select_seconds() / reps;  // mean over the timed calls
  pass.device_s = cctx->replay_seconds(verify, reps);
  ver.device_s = cctx->replay_seconds(verify, reps, /*selection=*/false);
  ver.wall_s = pass.wall_s - sel.device_s;
  // Captured scores: fp16 per candidate, a float lse per (row, head).
  const double cap_bytes =
      double(c.n_layers) * B * cap_rows.size() * c.n_heads * (n_cand * 2.0 + 4);
  ver.floor_s = (weights + double(B) * (ctx_len + gamma + 1) * kv_token + cap_bytes) / bandwidth;
  sel.floor_s = cap_bytes / bandwidth;
  pass.floor_s = ver.floor_s + sel.floor_s;

  Phase dr;
  const int selected = plan.head + plan.tail + plan.scored;
  for (int i = 0; i < 3; ++i) ctx->forward_sample(draft, rules.data(), out.data());
  dr.wall_s = wall_median(reps, [&] { ctx->forward_sample(draft, rules.data(), out.data()); });
  dr.device_s = cctx->replay_seconds(draft, reps);
  dr.floor_s = (weights + double(B) * (selected + 2) * kv_token) / bandwidth;
  // The round's gamma draft passes in one call (forward_draft_chain: each
  // pass fed the previous draws on the device): wall time per pass.
  Phase chain;
  chain.floor_s = dr.floor_s;
  std::vector<int32_t> chain_tokens(size_t(B) * gamma), chain_k(B, 20);
  std::vector<LogitCandidates> chain_cands;
  auto chain_call = [&] {
    return ctx->forward_draft_chain(draft, gamma, rules.data(), chain_k.data(), chain_tokens.data(),
                                    &chain_cands);
  };
  if (chain_call()) {
    chain_call();
    chain.wall_s = wall_median(reps, chain_call) / gamma;
    chain.device_s = chain.wall_s;  // no device-only timing: wall per pass
  }
  report(model_name, sh, r, plan, van, ver, sel, pass, dr, chain);
}

}  // namespace

#if defined(VEGAS_TIMELINE)
void tl_qkv_print(int marks);  // kernels/timeline.cuh
void tl_attn_print(int marks);
void tl_gemm_o_print(int marks);
void tl_gemm_gu_print(int marks);
void tl_gemm_down_print(int marks);
void tl_select_print(int marks);
#endif

int main(int argc, char **argv) {
  const std::string dir =
      argc > 1 ? argv[1] : std::string(VEGAS_SOURCE_DIR) + "/models/vegas-code-22m";
  const std::string synthetic_config = argc > 2 ? argv[2] : "";
  RoundSetup r;
  r.gamma = static_cast<int>(env_number("VEGAS_PHASE_GAMMA", 6));
  r.ratio = env_number("VEGAS_PHASE_RATIO", 0.07);
  if (const char *pol = std::getenv("VEGAS_PHASE_POLICY")) r.policy = pol;
  std::vector<Shape> shapes = shapes_from_env("VEGAS_PHASE_SHAPES");
  if (std::getenv("VEGAS_PHASE_SHAPES") == nullptr) shapes = {{8192, 16}, {8192, 64}, {16384, 32}};
  std::vector<Shape> synthetic = shapes_from_env("VEGAS_PHASE_SYNTHETIC");
  if (std::getenv("VEGAS_PHASE_SYNTHETIC") == nullptr) synthetic = {{32768, 4}};
  try {
    std::printf("%-22s %12s %-9s %9s %9s %9s %8s %8s %8s\n", "model", "shape", "phase", "device_ms",
                "wall_ms", "floor_ms", "of_floor", "/van_dev", "/van_wall");
    {
      const ModelConfig config = load_model_config(dir + "/config.json");
      auto store = WeightStore::open(dir);
      const ModelWeights weights = bind_model_weights(config, *store);
      auto model = create_cuda_backend(config, weights, CudaBackendOptions{});
      const double bw = model->measure_copy_bandwidth();
      std::printf("# copy bandwidth %.0f GB/s (read + written)\n", bw / 1e9);
      for (const Shape &sh : shapes)
        bench_round(*model, sh.fp8 ? "vegas-code-22m fp8-kv" : "vegas-code-22m", sh, r, bw);
    }
    if (!synthetic_config.empty() && !synthetic.empty()) {
      const ModelConfig config = load_model_config(synthetic_config);
      CudaBackendOptions o;
      const char *weights = std::getenv("VEGAS_PHASE_WEIGHTS");
      o.synthetic_weights = bench::synthetic_weights_named(weights ? weights : "bf16");
      auto model = create_cuda_backend_synthetic(config, 42, o);
      const double bw = model->measure_copy_bandwidth();
      const std::string name = std::string("qwen3-8b-shapes ") + (weights ? weights : "bf16");
      for (const Shape &sh : synthetic) bench_round(*model, name, sh, r, bw);
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "bench_cuda_phases: %s\n", e.what());
    return 1;
  }
#if defined(VEGAS_TIMELINE)
  tl_qkv_print(6);
  tl_attn_print(12);
  tl_gemm_o_print(3);
  tl_gemm_gu_print(3);
  tl_gemm_down_print(3);
  tl_select_print(5);
#endif
  return 0;
}
