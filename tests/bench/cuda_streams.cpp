// Do the steps of separate contexts overlap on the device? A 22m draft step
// is ~0.18 ms of dependent kernel latency whatever its rows (README), so a
// batch split into G groups, each with its own context and stream, might run
// G rounds in about the time of one. Usage:
//   bench_cuda_streams [model_dir]
// VEGAS_STREAM_SHAPES="8192x16,8192x64" and VEGAS_STREAM_GROUPS="1,2,4".
//
// For each shape and G, G contexts of batch/G sequences each (random KV)
// replay, per iteration and on their own streams, a "round": gamma (6) sparse
// draft steps then one verify pass of gamma + 1 rows with the device
// selection; also vanilla steps alone. Printed: wall ms per iteration (host
// clock over 50 iterations after warm-up, every stream drained), i.e. the
// time the whole batch's round (or step) takes with G-way overlap.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_context.h"
#include "bench_env.h"
#include "decode_rows.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/weight_store.h"
#include "select/select_policy.h"

using namespace vegas;

namespace {

constexpr int kGamma = 6;
constexpr int kPage = 16;

// One group: a context of `batch` sequences at `context` with its three steps.
struct Group {
  std::unique_ptr<BackendContext> ctx;
  cuda::CudaContext *cuda = nullptr;
  bench::DecodeRows rows;
  std::vector<std::vector<int32_t>> verify_tokens;
  std::vector<int32_t> cap_rows;
  std::vector<ScoreCapture> caps;
  std::vector<DeviceSelection> sels;
  ForwardBatch vanilla, verify, draft;
};

std::unique_ptr<Group> make_group(BackendModel &model, int context, int batch, uint64_t seed) {
  const ModelConfig &c = model.config();
  auto g = std::make_unique<Group>();
  const int pages_per_seq = (context + kGamma + 2 + kPage - 1) / kPage;
  ContextParams p;
  p.page_size = kPage;
  p.num_pages = pages_per_seq * batch;
  p.max_rows = std::max(batch * (kGamma + 1), 64);
  g->ctx = model.create_context(p);
  g->cuda = dynamic_cast<cuda::CudaContext *>(g->ctx.get());
  g->cuda->randomize_kv(seed);

  SelectionOptions opts;
  opts.ratio = 0.07f;
  SelectionShape shape;
  shape.max_candidates = context + kGamma + 2;
  shape.max_rows = kGamma + 1;
  shape.n_heads = c.n_heads;
  shape.n_kv_heads = c.n_kv_heads;
  shape.head_dim = c.head_dim;
  auto policy = make_selection_policy("vegas", opts, shape);
  const int n_cand = context + 1;
  DevicePlan plan;
  policy->device_plan(n_cand, &plan);
  g->cap_rows = {0, kGamma};

  bench::make_decode_rows(batch, pages_per_seq, context, c.vocab_size, &g->rows);
  g->vanilla = g->rows.batch;
  g->verify_tokens.assign(batch, {});
  g->caps.resize(batch);
  g->sels.resize(batch);
  for (int s = 0; s < batch; ++s) {
    for (int k = 0; k <= kGamma; ++k)
      g->verify_tokens[s].push_back((s * 31 + k * 977) % c.vocab_size);
    const SeqRows &row = g->vanilla.seqs[s];
    SeqRows v = row;
    v.tokens = g->verify_tokens[s].data();
    v.n_tokens = kGamma + 1;
    v.logits = SeqRows::Logits::kAll;
    g->caps[s].n_candidates = n_cand;
    g->caps[s].rows = g->cap_rows.data();
    g->caps[s].n_rows = static_cast<int32_t>(g->cap_rows.size());
    g->sels[s] = DeviceSelection{s, plan.head, plan.tail, plan.scored, plan.weight, false};
    v.capture = &g->caps[s];
    v.device_select = &g->sels[s];
    g->verify.seqs.push_back(v);
    SeqRows d = row;
    d.start_pos = context + 1;
    d.device_sparse_key = s;
    d.device_sparse_span = plan.head + plan.tail + plan.scored + (d.start_pos + 1 - n_cand);
    g->draft.seqs.push_back(d);
  }
  g->ctx->forward(g->verify);  // the first selection, which the draft steps read
  return g;
}

// Wall ms per iteration of `body` over every group: one host thread per
// group (each waits only for its own context), streams drained.
template <typename F>
double per_iteration_ms(std::vector<std::unique_ptr<Group>> &groups, F &&body) {
  auto run = [&](int n) {
    std::vector<std::thread> threads;
    for (auto &g : groups)
      threads.emplace_back([&, gp = g.get()] {
        for (int i = 0; i < n; ++i) body(*gp);
        gp->cuda->synchronize();
      });
    for (auto &t : threads) t.join();
  };
  run(5);
  std::vector<double> t;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    run(20);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 20 *
                1e3);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
  const std::string dir =
      argc > 1 ? argv[1] : std::string(VEGAS_SOURCE_DIR) + "/models/vegas-code-22m";
  const char *shapes_env = std::getenv("VEGAS_STREAM_SHAPES");
  std::istringstream shapes(shapes_env ? shapes_env : "8192x16,8192x64");
  const std::vector<int> group_counts = bench::ints_from_env("VEGAS_STREAM_GROUPS", {1, 2, 4});
  try {
    const ModelConfig config = load_model_config(dir + "/config.json");
    auto store = WeightStore::open(dir);
    const ModelWeights weights = bind_model_weights(config, *store);
    auto model = create_cuda_backend(config, weights, CudaBackendOptions{});
    std::printf("%-10s %6s %12s %12s %12s %12s\n", "shape", "groups", "vanilla_ms", "draft_ms",
                "verify_ms", "round_ms");
    for (std::string item; std::getline(shapes, item, ',');) {
      int context = 0, batch = 0;
      if (std::sscanf(item.c_str(), "%dx%d", &context, &batch) != 2) continue;
      for (int G : group_counts) {
        if (G <= 0 || batch % G != 0) continue;
        std::vector<std::unique_ptr<Group>> groups;
        for (int i = 0; i < G; ++i)
          groups.push_back(make_group(*model, context, batch / G, 99 + i));
        std::fprintf(stderr, "%s G %d: vanilla\n", item.c_str(), G);
        const double van =
            per_iteration_ms(groups, [](Group &g) { g.cuda->enqueue_replay(g.vanilla); });
        std::fprintf(stderr, "draft\n");
        const double dr =
            per_iteration_ms(groups, [](Group &g) { g.cuda->enqueue_replay(g.draft); });
        std::fprintf(stderr, "verify\n");
        const double ver =
            per_iteration_ms(groups, [](Group &g) { g.cuda->enqueue_replay(g.verify); });
        std::fprintf(stderr, "round\n");
        const double round = per_iteration_ms(groups, [](Group &g) {
          for (int k = 0; k < kGamma; ++k) g.cuda->enqueue_replay(g.draft);
          g.cuda->enqueue_replay(g.verify);
        });
        std::printf("%-10s %6d %12.3f %12.3f %12.3f %12.3f\n", item.c_str(), G, van, dr, ver,
                    round);
        std::printf(
            "{\"context\":%d,\"batch\":%d,\"groups\":%d,\"vanilla_ms\":%.4f,\"draft_ms\":%.4f,"
            "\"verify_ms\":%.4f,\"round_ms\":%.4f}\n",
            context, batch, G, van, dr, ver, round);
        std::fflush(stdout);
      }
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "bench_cuda_streams: %s\n", e.what());
    return 1;
  }
  return 0;
}
