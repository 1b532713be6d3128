// The drafter interface (drafter.h): each kind fills a round's drafts its own
// way behind one Drafter::draft. Prompt lookup drafts from the context with
// q one-hot and shortens γ to what it found; the sparse drafter begins a
// chain where the round's rows are candidates and else drafts pass by pass,
// or grows trees; a draft model catches its KV up, then runs the passes on
// its own context and reads its chain itself (no verify pass reads it). The
// passes are a recording stand-in here: what each drafter asks of them.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "speculative/drafter.h"
#include "speculative/lookup_drafter.h"
#include "speculative/model_drafter.h"
#include "speculative/round_state.h"

namespace vegas {
namespace {

// Records which of the decoder's passes a drafter asked for, and on which
// context; begin_chain answers `chains`, finish_chain `chain_whole`.
class RecordingPasses final : public DraftPasses {
 public:
  bool chains = false, chain_whole = true;
  std::vector<std::string> calls;
  std::vector<const BackendContext *> contexts;

  bool begin_chain(std::vector<RoundWork> &, int32_t, BackendContext &context,
                   ChainedDrafts *) override {
    record("begin_chain", context);
    return chains;
  }
  void pass_by_pass(std::vector<RoundWork> &, int32_t, BackendContext &context,
                    RoundState &) override {
    record("pass_by_pass", context);
  }
  void tree_levels(std::vector<RoundWork> &, int32_t, BackendContext &context,
                   RoundState &) override {
    record("tree_levels", context);
  }
  bool finish_chain(ChainedDrafts &, BackendContext &context) override {
    record("finish_chain", context);
    return chain_whole;
  }
  void build_chained_q(ChainedDrafts &) override { calls.push_back("build_chained_q"); }
  void drop_chained_drafts(ChainedDrafts &) override { calls.push_back("drop_chained_drafts"); }
  void abandon_chain(ChainedDrafts *) override { calls.push_back("abandon_chain"); }

 private:
  void record(const char *what, const BackendContext &context) {
    calls.push_back(what);
    contexts.push_back(&context);
  }
};

// A context that answers every pass with nothing (the draft model's catch-up).
class IdleContext final : public BackendContext {
 public:
  const float *forward(const ForwardBatch &) override { return nullptr; }
};

std::unique_ptr<Sequence> sequence_of(int32_t id, const std::vector<int32_t> &tokens) {
  SequenceRequest req;
  req.prompt.assign(tokens.begin(), tokens.end());
  auto seq = std::make_unique<Sequence>(id, std::move(req), nullptr);
  seq->page_table.assign(64, 0);
  seq->kv_len = static_cast<int32_t>(tokens.size()) - 1;  // the newest token pending
  return seq;
}

RoundWork work_of(const Sequence &seq, int32_t gamma) {
  RoundWork w{&seq, nullptr, gamma, 1, seq.rng, {}, {}};
  w.drafts.resize(static_cast<size_t>(gamma));
  w.q.resize(static_cast<size_t>(gamma));
  return w;
}

TEST(Drafters, EachKindNamesItself) {
  EXPECT_STREQ(SparseDrafter(false).name(), "sparse");
  EXPECT_STREQ(LookupDrafter().name(), "lookup");
  IdleContext ctx;
  EXPECT_STREQ(ModelDrafter(ctx, 64, 2, 0, 4).name(), "model");
  EXPECT_TRUE(LookupDrafter().drafts_without_passes());
  EXPECT_FALSE(SparseDrafter(false).drafts_without_passes());
}

// Lookup: the continuation of the context's earlier occurrence, q one-hot
// at probability 1; a sequence whose suffix never occurred drafts nothing
// and verifies its newest token alone. No pass is run.
TEST(Drafters, LookupDraftsFromTheContextAndShortensGamma) {
  const auto repeats = sequence_of(1, {5, 6, 7, 8, 9, 5, 6, 7});
  const auto fresh = sequence_of(2, {11, 12, 13, 14});
  std::vector<RoundWork> work = {work_of(*repeats, 4), work_of(*fresh, 4)};
  IdleContext model;
  RoundState rs;
  RecordingPasses passes;
  LookupDrafter lookup;
  Drafter &drafter = lookup;
  drafter.begin_prompt(*repeats);
  drafter.begin_prompt(*fresh);
  RoundDrafting round{work, 4, model, rs, passes};
  drafter.draft(round);
  EXPECT_EQ(work[0].drafts, (std::vector<int32_t>{8, 9, 5, 6}));
  EXPECT_EQ(work[0].gamma, 4);
  ASSERT_EQ(work[0].q.size(), 4u);
  for (size_t j = 0; j < 4; ++j) {
    EXPECT_EQ(work[0].q[j].ids, std::vector<int32_t>{work[0].drafts[j]});
    EXPECT_EQ(work[0].q[j].probs, std::vector<float>{1.0f});
  }
  EXPECT_TRUE(work[1].drafts.empty());
  EXPECT_EQ(work[1].gamma, 0);
  EXPECT_TRUE(work[1].q.empty());
  EXPECT_TRUE(passes.calls.empty());
  drafter.forget(1);
  drafter.forget(2);
}

// Sparse: a chain on the model's context where the rows are candidates and
// the context begins one (left begun for the verify pass), else pass by
// pass; a tree round grows trees.
TEST(Drafters, SparseChainsWhereItCanElsePassByPass) {
  const auto seq = sequence_of(1, {1, 2, 3});
  std::vector<RoundWork> work = {work_of(*seq, 3)};
  IdleContext model;
  {
    RoundState rs;
    RecordingPasses passes;
    passes.chains = true;
    RoundDrafting round{work, 3, model, rs, passes};
    SparseDrafter(false).draft(round);
    EXPECT_EQ(passes.calls, std::vector<std::string>{"begin_chain"});
    EXPECT_TRUE(rs.chain_begun) << "the verify pass reads the chain";
    EXPECT_EQ(passes.contexts[0], &model);
  }
  {
    RoundState rs;
    RecordingPasses passes;  // the context cannot chain
    RoundDrafting round{work, 3, model, rs, passes};
    SparseDrafter(false).draft(round);
    EXPECT_EQ(passes.calls, (std::vector<std::string>{"begin_chain", "pass_by_pass"}));
    EXPECT_FALSE(rs.chain_begun);
  }
  {
    RoundState rs;
    rs.by_candidates = false;  // whole rows (penalties): never a chain
    RecordingPasses passes;
    passes.chains = true;
    RoundDrafting round{work, 3, model, rs, passes};
    SparseDrafter(false).draft(round);
    EXPECT_EQ(passes.calls, std::vector<std::string>{"pass_by_pass"});
    EXPECT_FALSE(rs.chain_begun);
  }
  {
    RoundState rs;
    RecordingPasses passes;
    RoundDrafting round{work, 3, model, rs, passes};
    SparseDrafter(true).draft(round);
    EXPECT_EQ(passes.calls, std::vector<std::string>{"tree_levels"});
  }
}

// A draft model: its passes on its own context, never the model's; a chain
// there is read by the drafter itself (finish, then q, or the drafts dropped
// when the candidates were lost) and never left for the verify pass.
TEST(Drafters, ADraftModelRunsItsPassesOnItsOwnContext) {
  const auto seq = sequence_of(1, {1, 2, 3, 4});
  std::vector<RoundWork> work = {work_of(*seq, 2)};
  IdleContext model, draft;
  ModelDrafter drafter(draft, 64, 2, 0, 4);
  struct Case {
    bool chains, whole;
    std::vector<std::string> calls;
  };
  const std::vector<Case> cases = {
      {true, true, {"begin_chain", "finish_chain", "build_chained_q", "abandon_chain"}},
      {true, false, {"begin_chain", "finish_chain", "drop_chained_drafts", "abandon_chain"}},
      {false, true, {"begin_chain", "pass_by_pass"}},
  };
  for (const Case &c : cases) {
    RoundState rs;
    RecordingPasses passes;
    passes.chains = c.chains;
    passes.chain_whole = c.whole;
    RoundDrafting round{work, 2, model, rs, passes};
    drafter.draft(round);
    EXPECT_EQ(passes.calls, c.calls);
    for (const BackendContext *ctx : passes.contexts) EXPECT_EQ(ctx, &draft);
    EXPECT_FALSE(rs.chain_begun);
  }
}

}  // namespace
}  // namespace vegas
