// Token trees on the embedded model (CPU backend): tree attention gives each
// node exactly what the chain of its path gives, move_kv puts an accepted path
// in place, greedy Vegas with trees equals vanilla on the public 2K prompts,
// sampled tree rounds are reproducible and count what they did, and a session
// refuses tree options it cannot run.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "session/session.h"
#include "speculative_harness.h"
#include "speculative_test_data.h"
#include "support/model_dir.h"
#include "support/session_run.h"
#include "vegas.h"

namespace vegas {
namespace {

constexpr int32_t kNewTokens = 64;
constexpr int32_t kPage = 16;

std::shared_ptr<Model> &shared_model() {
  return test::shared_cpu_model(test::embedded_model_dir());
}

std::vector<int32_t> prompt_ids(int32_t n) {
  std::vector<int32_t> ids = test::fibonacci_prompt(*shared_model());
  ids.resize(static_cast<size_t>(std::min<int32_t>(n, static_cast<int32_t>(ids.size()))));
  return ids;
}

// The tree of the tests: root -> {a, b}; a -> {c, d}; b -> {e}; c -> {f}
// (level order: r a b c d e f), with arbitrary token ids.
const std::vector<int32_t> kParents = {-1, 0, 0, 1, 1, 2, 3};
const std::vector<int32_t> kTokens = {785, 1290, 330, 4150, 12, 999, 2048};
const std::vector<std::vector<int32_t>> kLeafPaths = {{0, 1, 3, 6}, {0, 1, 4}, {0, 2, 5}};

// Two sequences' worth of pages in one context: T (trees) on pages [0, 16),
// C (chains) on pages [16, 32), both holding the KV of a 40-token prompt,
// and the test tree on T's slots after it.
struct TwoSequences {
  std::unique_ptr<BackendContext> context;
  std::vector<int32_t> tree_pages, chain_pages;
  int32_t vocab = 0;
  int32_t base = 0;  // the prompt's length: the tree's first slot
  TokenTree tree;

  explicit TwoSequences(const Model &model) {
    ContextParams cp;
    cp.page_size = kPage;
    cp.num_pages = 32;
    cp.max_rows = 256;
    context = model.backend().create_context(cp);
    for (int32_t p = 0; p < 16; ++p) {
      tree_pages.push_back(p);
      chain_pages.push_back(16 + p);
    }
    vocab = model.config().vocab_size;
    const std::vector<int32_t> prompt = prompt_ids(40);
    base = static_cast<int32_t>(prompt.size());
    tree = TokenTree{base, kParents.data(), 7};
    for (bool t : {true, false}) {
      SeqRows r = rows(t, prompt.data(), base, 0);
      r.logits = SeqRows::Logits::kNone;
      forward(r);
    }
  }
  SeqRows rows(bool tree_seq, const int32_t *tokens, int32_t n, int32_t start) const {
    const std::vector<int32_t> &pages = tree_seq ? tree_pages : chain_pages;
    SeqRows r;
    r.tokens = tokens;
    r.n_tokens = n;
    r.start_pos = start;
    r.page_table = pages.data();
    r.n_pages = static_cast<int32_t>(pages.size());
    r.logits = SeqRows::Logits::kAll;
    return r;
  }
  std::vector<float> forward(const SeqRows &r) {
    ForwardBatch b;
    b.seqs.push_back(r);
    const float *logits = context->forward(b);
    return std::vector<float>(logits, logits + static_cast<size_t>(b.logit_rows()) * vocab);
  }
  // One pass over every node of the tree (a verify pass), `sparse` optional.
  std::vector<float> whole_tree(const SparseAttention *sparse = nullptr) {
    SeqRows r = rows(true, kTokens.data(), 7, base);
    r.tree = &tree;
    r.sparse = sparse;
    return forward(r);
  }
};

// Proves tree attention is the chain of each path: in one verify pass over
// the 7 nodes, every node's logits equal (bit for bit: the same keys in the
// same order, the same arithmetic) the row of the chain forward of the path
// from the root to it. Also for a sparse drafting set below the tree.
TEST(TreeAttention, EveryNodeEqualsTheChainOfItsPath) {
  for (bool sparse : {false, true}) {
    TwoSequences s(*shared_model());
    const int32_t base = s.base;
    const int32_t n_layers = shared_model()->config().n_layers;
    std::vector<int32_t> positions, counts(static_cast<size_t>(n_layers), 0);
    const int32_t stride = base;
    positions.assign(static_cast<size_t>(n_layers) * stride, 0);
    for (int32_t l = 0; l < n_layers; ++l)
      for (int32_t p = 0; p < 20; p += 1 + l % 3)
        positions[static_cast<size_t>(l) * stride + counts[l]++] = p;
    SparseAttention set{30, positions.data(), counts.data(), stride};
    const std::vector<float> tree_logits = s.whole_tree(sparse ? &set : nullptr);
    for (const std::vector<int32_t> &path : kLeafPaths) {
      std::vector<int32_t> tokens;
      for (int32_t node : path) tokens.push_back(kTokens[static_cast<size_t>(node)]);
      SeqRows c = s.rows(false, tokens.data(), static_cast<int32_t>(tokens.size()), base);
      if (sparse) c.sparse = &set;
      const std::vector<float> chain = s.forward(c);
      for (size_t k = 0; k < path.size(); ++k)
        EXPECT_EQ(0, std::memcmp(chain.data() + k * s.vocab,
                                 tree_logits.data() + static_cast<size_t>(path[k]) * s.vocab,
                                 sizeof(float) * s.vocab))
            << "node " << path[k] << (sparse ? " (sparse)" : "");
    }
  }
}

// Proves a draft pass of one level (rows in the middle of the tree, their
// ancestors already in the cache) equals the verify pass's rows.
TEST(TreeAttention, ALevelPassEqualsTheWholeTree) {
  TwoSequences s(*shared_model());
  const std::vector<float> whole = s.whole_tree();
  for (const auto &[begin, end] :
       std::vector<std::pair<int32_t, int32_t>>{{0, 1}, {1, 3}, {3, 6}}) {
    SeqRows level = s.rows(true, kTokens.data() + begin, end - begin, s.base + begin);
    level.tree = &s.tree;
    const std::vector<float> rows = s.forward(level);
    EXPECT_EQ(0, std::memcmp(rows.data(), whole.data() + static_cast<size_t>(begin) * s.vocab,
                             sizeof(float) * rows.size()))
        << "level from node " << begin;
  }
}

// Proves move_kv puts an accepted path where its positions are: after the
// tree pass and moving path r b e into slots base .. base + 2, the next
// token's logits equal those after the chain r b e.
TEST(TreeAttention, MoveKvPutsTheAcceptedPathInPlace) {
  TwoSequences s(*shared_model());
  const int32_t base = s.base;
  s.whole_tree();
  const int32_t from[] = {base + 2, base + 5}, to[] = {base + 1, base + 2};
  KvMove move{s.tree_pages.data(), 16, from, to, 2};
  s.context->move_kv(move);
  const int32_t chain[] = {kTokens[0], kTokens[2], kTokens[5]};
  s.forward(s.rows(false, chain, 3, base));
  const int32_t next = 4242;
  const std::vector<float> after_tree = s.forward(s.rows(true, &next, 1, base + 3));
  const std::vector<float> after_chain = s.forward(s.rows(false, &next, 1, base + 3));
  EXPECT_EQ(0, std::memcmp(after_tree.data(), after_chain.data(), sizeof(float) * s.vocab));
  // A position outside the table is an error, not a stray write.
  const int32_t far[] = {16 * kPage};
  KvMove bad{s.tree_pages.data(), 16, far, to, 1};
  EXPECT_THROW(s.context->move_kv(bad), Error);
}

SpeculativeParams tree_params(const char *policy, DraftTreeShape shape) {
  SpeculativeParams p;
  p.policy = policy;
  p.gamma = 6;
  p.tree = shape;
  return p;
}

double tau(const SequenceStats &s) {
  return s.rounds > 0 ? static_cast<double>(s.accepted + s.rounds) / s.rounds : 0.0;
}

// Proves greedy Vegas with token trees is lossless: on every public 2K
// prompt (two shards), 64 tokens of tree rounds equal vanilla's for the
// policies vegas, streaming and full, with trees of 2 branches over 2 levels
// and 3 over 1; the counters add up (a tree drafts its nodes), full accepts
// a whole path every round, and the sparse trees reject some drafts.
class TreeLosslessShard : public ::testing::TestWithParam<size_t> {};

TEST_P(TreeLosslessShard, GreedyEqualsVanillaOnPublic2kPrompts) {
  if (!test::have_model_and_prompts()) GTEST_SKIP() << "embedded model or public prompts absent";
  const auto all = test::load_public_prompts(shared_model()->tokenizer(), "-2k");
  ASSERT_GE(all.size(), 2u);
  int64_t rejected = 0;
  for (size_t i = GetParam(); i < all.size(); i += 2) {
    const auto &prompt = all[i];
    const std::vector<int32_t> reference =
        test::session_tokens(shared_model(), SessionParams{}, prompt.ids, kNewTokens);
    test::SharedPrefixRunner runner(*shared_model(), prompt.ids, kNewTokens, 64);
    for (const char *policy : {"vegas", "streaming", "full"}) {
      for (const DraftTreeShape shape : {DraftTreeShape{2, 2}, DraftTreeShape{3, 1}}) {
        const test::SpeculativeRun run =
            runner.run(tree_params(policy, shape), SamplingParams{}, kNewTokens);
        EXPECT_EQ(run.generated, reference) << prompt.id << " policy " << policy << " tree "
                                            << shape.branches << "x" << shape.branch_depth;
        EXPECT_EQ(run.stats.committed, kNewTokens - 1);
        EXPECT_EQ(run.stats.committed, run.stats.accepted + run.stats.rounds);
        // Every tree round drafts more than its depth.
        EXPECT_GT(run.stats.drafted, int64_t{6} * (run.stats.rounds - 1));
        if (std::string(policy) == "full")  // every round keeps a path of its whole depth
          EXPECT_EQ(run.totals.accepted_at, run.totals.drafted_at) << prompt.id;
        else
          rejected += run.stats.drafted - run.stats.accepted;
        std::printf("[ %s ] %-9s tree %dx%d: tau %.2f, %.1f drafts a round\n", prompt.id.c_str(),
                    policy, shape.branches, shape.branch_depth, tau(run.stats),
                    static_cast<double>(run.stats.drafted) / run.stats.rounds);
      }
    }
  }
  EXPECT_GT(rejected, 0);
}
INSTANTIATE_TEST_SUITE_P(Prompts, TreeLosslessShard, ::testing::Range<size_t>(0, 2));

// Proves sampled tree rounds on the model (penalties included, so the rows'
// histories follow each path) are reproducible from the seed, commit what
// they count.
TEST(TreeSampling, ReproducibleAndCounted) {
  const std::vector<int32_t> prompt = test::fibonacci_prompt(*shared_model());
  test::SharedPrefixRunner runner(*shared_model(), prompt, 48, 64);
  SamplingParams sampling;
  sampling.temperature = 0.8f;
  sampling.top_k = 20;
  sampling.repetition_penalty = 1.1f;
  sampling.seed = 11;
  const SpeculativeParams params = tree_params("vegas", DraftTreeShape{3, 2});
  const test::SpeculativeRun a = runner.run(params, sampling, 48);
  const test::SpeculativeRun b = runner.run(params, sampling, 48);
  EXPECT_EQ(a.generated, b.generated);
  EXPECT_EQ(a.stats.committed, 47);
  EXPECT_EQ(a.stats.committed, a.stats.accepted + a.stats.rounds);
  EXPECT_GT(a.stats.accepted, 0);
  std::printf("sampled tree 3x2: tau %.2f\n", tau(a.stats));
}

// Proves a session runs tree rounds end to end (scheduler, KV room, row
// budget) with the same greedy output as vanilla, also when the pool is too
// small for whole trees (those sequences draft chains).
TEST(TreeSession, GreedyEqualsVanillaAlsoWithoutRoomForTrees) {
  const std::vector<int32_t> prompt = test::fibonacci_prompt(*shared_model());
  const std::vector<int32_t> reference =
      test::session_tokens(shared_model(), SessionParams{}, prompt, 40);
  for (const uint64_t kv_tokens : {uint64_t{4096}, uint64_t{prompt.size() + 40 + 16}}) {
    SessionParams sp;
    sp.speculative = true;
    sp.spec = tree_params("vegas", DraftTreeShape{2, 3});
    sp.kv_bytes = kv_tokens * shared_model()->backend().kv_bytes_per_token(false);
    SequenceStats stats;
    EXPECT_EQ(test::session_tokens(shared_model(), sp, prompt, 40, &stats), reference)
        << kv_tokens << " tokens of KV";
    EXPECT_EQ(stats.committed, stats.accepted + stats.rounds);
  }
}

vegas_status create_with(vegas_model *model, int32_t branches, int32_t depth, const char *policy,
                         std::string *message) {
  vegas_session_options o;
  vegas_session_options_init(&o);
  o.mode = VEGAS_MODE_VEGAS;
  o.policy = policy;
  o.tree_branches = branches;
  o.tree_depth = depth;
  o.kv_bytes = 64 << 20;
  vegas_session *session = nullptr;
  const vegas_status st = vegas_session_create(model, &o, &session);
  *message = vegas_last_error();
  vegas_session_free(session);
  return st;
}

// Proves the ABI refuses what trees cannot be, with a message naming it:
// branches outside [1, 8], negative depth, more than 256 nodes at the
// session's gamma, and policies that cannot draft trees; and takes a valid
// tree, and the chain defaults (1, 0), from an old caller's smaller struct.
TEST(TreeSession, AbiRefusesBadTreesWithAMessage) {
  vegas_model_options mo;
  vegas_model_options_init(&mo);
  mo.backend = VEGAS_BACKEND_CPU;
  vegas_model *model = nullptr;
  ASSERT_EQ(vegas_model_load(test::embedded_model_dir().c_str(), &mo, &model), VEGAS_OK);
  std::string msg;
  EXPECT_EQ(create_with(model, 0, 1, "vegas", &msg), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("branches"), std::string::npos) << msg;
  EXPECT_EQ(create_with(model, 9, 1, "vegas", &msg), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(create_with(model, 2, -1, "vegas", &msg), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(create_with(model, 8, 6, "vegas", &msg), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("256"), std::string::npos) << msg;
  EXPECT_EQ(create_with(model, 2, 2, "quest", &msg), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("quest"), std::string::npos) << msg;
  EXPECT_EQ(create_with(model, 2, 2, "lookup", &msg), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(create_with(model, 2, 2, "vegas+lookup", &msg), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(create_with(model, 2, 2, "vegas", &msg), VEGAS_OK) << msg;
  EXPECT_EQ(create_with(model, 1, 0, "vegas", &msg), VEGAS_OK) << msg;
  vegas_session_options old;
  vegas_session_options_init_sized(&old, offsetof(vegas_session_options, tree_branches));
  EXPECT_EQ(old.struct_size, offsetof(vegas_session_options, tree_branches));
  vegas_session_options full;
  vegas_session_options_init(&full);
  EXPECT_EQ(full.tree_branches, 1);
  EXPECT_EQ(full.tree_depth, 0);
  vegas_model_free(model);
}

}  // namespace
}  // namespace vegas
