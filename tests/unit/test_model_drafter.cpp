// ModelDrafter, a draft model's side of the rounds, against a context that
// records the forward passes it is given: what the draft runs so that its KV
// holds each sequence's tokens exactly once (prefill chunks followed, a
// cached prefix run from position 0, catch-up after a round that accepted
// every draft, chunks batched across sequences up to the row limit), and the
// window its rows attend to.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "common/error.h"
#include "speculative/model_drafter.h"

namespace vegas {
namespace {

// Records each forward pass as (sequence's first token, start, rows) entries;
// the sequences' tokens are their ids times 1000 plus the position, so a row
// also proves which tokens it was given.
class RecordingContext final : public BackendContext {
 public:
  struct Row {
    int32_t start, n;
  };
  const float *forward(const ForwardBatch &batch) override {
    passes.emplace_back();
    for (const SeqRows &r : batch.seqs) {
      EXPECT_EQ(r.logits, SeqRows::Logits::kNone);
      for (int32_t t = 0; t < r.n_tokens; ++t)
        EXPECT_EQ(r.tokens[t] % 1000, r.start_pos + t) << "a row's tokens are its positions'";
      const int32_t seq = r.tokens[0] / 1000;
      passes.back().emplace_back(seq, Row{r.start_pos, r.n_tokens});
      covered[seq].push_back({r.start_pos, r.n_tokens});
    }
    return nullptr;
  }
  std::vector<std::vector<std::pair<int32_t, Row>>> passes;
  std::map<int32_t, std::vector<Row>> covered;  // per sequence, in order
};

std::unique_ptr<Sequence> make_sequence(int32_t id, int32_t n_tokens) {
  SequenceRequest req;
  for (int32_t p = 0; p < n_tokens; ++p) req.prompt.push_back(id * 1000 + p);
  auto seq = std::make_unique<Sequence>(id, std::move(req), nullptr);
  seq->page_table.assign(64, 0);
  return seq;
}

// Positions [0, end) of `seq`, each run exactly once, in order.
void expect_covered_once(const RecordingContext &ctx, int32_t seq, int32_t end) {
  int32_t next = 0;
  const auto it = ctx.covered.find(seq);
  ASSERT_TRUE(it != ctx.covered.end() || end == 0) << "sequence " << seq;
  if (it != ctx.covered.end())
    for (const RecordingContext::Row &r : it->second) {
      EXPECT_EQ(r.start, next) << "sequence " << seq << ": a gap or a position run twice";
      next = r.start + r.n;
    }
  EXPECT_EQ(next, end) << "sequence " << seq;
}

SeqRows rows_of(const Sequence &seq, int32_t start, int32_t n) {
  SeqRows r;
  r.tokens = seq.tokens.data() + start;
  r.start_pos = start;
  r.n_tokens = n;
  return r;
}

// Proves the draft prefills beside the model: after the prompt's chunks
// (and a first round at kv_len), it has run every prompt position once and
// the round runs nothing more.
TEST(ModelDrafter, FollowsThePrefillSoTheFirstRoundRunsNothing) {
  RecordingContext ctx;
  ModelDrafter drafter(ctx, 64, 2, 0, 4);
  const auto a = make_sequence(1, 100), b = make_sequence(2, 70);
  drafter.follow_prefill({a.get(), b.get()}, {rows_of(*a, 0, 40), rows_of(*b, 0, 24)});
  drafter.follow_prefill({a.get(), b.get()}, {rows_of(*a, 40, 59), rows_of(*b, 24, 45)});
  a->kv_len = 99, b->kv_len = 69;  // the newest token of each is the first draft row
  const size_t passes = ctx.passes.size();
  drafter.begin_round({a.get(), b.get()});
  EXPECT_EQ(ctx.passes.size(), passes) << "the round caught up on positions it had";
  expect_covered_once(ctx, 1, 99);
  expect_covered_once(ctx, 2, 69);
  for (const auto &pass : ctx.passes) {
    int32_t rows = 0;
    for (const auto &row : pass) rows += row.second.n;
    EXPECT_LE(rows, 64) << "a pass over the context's row limit";
  }
}

// Proves a prompt whose first chunk starts after a cached prefix is run from
// position 0 (the draft never ran the prefix's pages).
TEST(ModelDrafter, RunsACachedPrefixItNeverSaw) {
  RecordingContext ctx;
  ModelDrafter drafter(ctx, 256, 2, 0, 4);
  const auto a = make_sequence(3, 90);
  drafter.follow_prefill({a.get()}, {rows_of(*a, 64, 25)});
  expect_covered_once(ctx, 3, 89);
}

// Proves the catch-up after acceptance: a round that accepted every draft
// leaves the draft one token behind, one that rejected one leaves it level;
// the lacking tokens of every sequence go in one pass, and chunks split at
// the row limit cover each sequence once.
TEST(ModelDrafter, CatchesUpInBatchedChunks) {
  RecordingContext ctx;
  ModelDrafter drafter(ctx, 4, 2, 0, 4);
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<const Sequence *> all;
  for (int32_t id = 1; id <= 3; ++id) {
    seqs.push_back(make_sequence(id, 40));
    seqs.back()->kv_len = 3;
    all.push_back(seqs.back().get());
  }
  drafter.begin_round(all);  // 3 + 3 + 3 rows in passes of at most 4
  EXPECT_EQ(ctx.passes.size(), 3u);
  for (int32_t id = 1; id <= 3; ++id) expect_covered_once(ctx, id, 3);

  // γ 6 from kv_len 3: sequence 1 accepted all six drafts, 2 accepted two.
  drafter.settle_sequence(*seqs[0], 6, 6);
  drafter.settle_sequence(*seqs[1], 6, 2);
  drafter.settle_sequence(*seqs[2], 0, 0);  // verified without drafts: the draft ran nothing
  seqs[0]->kv_len = 3 + 1 + 6;
  seqs[1]->kv_len = 3 + 1 + 2;
  seqs[2]->kv_len = 4;
  ctx.passes.clear();
  drafter.begin_round(all);
  ASSERT_EQ(ctx.passes.size(), 1u) << "the lacking tokens of every sequence in one pass";
  ASSERT_EQ(ctx.passes[0].size(), 2u);
  EXPECT_EQ(ctx.passes[0][0].first, 1);
  EXPECT_EQ(ctx.passes[0][0].second.start, 9);  // the last draft, never run
  EXPECT_EQ(ctx.passes[0][0].second.n, 1);
  EXPECT_EQ(ctx.passes[0][1].first, 3);
  EXPECT_EQ(ctx.passes[0][1].second.start, 3);  // its round's first token
  EXPECT_EQ(ctx.passes[0][1].second.n, 1);
}

// Proves the window: none without draft_window; with one, the first `sink`
// positions listed on every draft layer and the last `window` positions from
// the prefix on; asking before the round began is an internal error.
TEST(ModelDrafter, WindowOverTheDraftsLayers) {
  RecordingContext ctx;
  const auto a = make_sequence(4, 600);
  a->kv_len = 500;
  ModelDrafter full(ctx, 1024, 3, 0, 4);
  full.begin_round({a.get()});
  EXPECT_EQ(full.window_of(*a), nullptr);

  ModelDrafter windowed(ctx, 1024, 3, 100, 4);
  try {
    windowed.window_of(*a);
    ADD_FAILURE() << "a window before the round began";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_INTERNAL);
  }
  windowed.begin_round({a.get()});
  const SparseAttention *w = windowed.window_of(*a);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->prefix, 400);
  ASSERT_EQ(w->stride, 4);
  for (int32_t l = 0; l < 3; ++l) {
    EXPECT_EQ(w->counts[l], 4);
    for (int32_t p = 0; p < 4; ++p) EXPECT_EQ(w->positions[l * w->stride + p], p);
  }
  a->kv_len = 50;  // shorter than the window: everything from 0, no sink listed
  windowed.begin_round({a.get()});
  w = windowed.window_of(*a);
  EXPECT_EQ(w->prefix, 0);
  EXPECT_EQ(w->counts[0], 0);
}

// Records, per forward pass, each row block's capture (rows and candidates).
class CaptureRecordingContext final : public BackendContext {
 public:
  struct Seen {
    int32_t seq, start, n, captured_row, candidates;
  };
  const float *forward(const ForwardBatch &batch) override {
    for (const SeqRows &r : batch.seqs)
      seen.push_back({r.tokens[0] / 1000, r.start_pos, r.n_tokens,
                      r.capture != nullptr ? r.capture->rows[0] : -1,
                      r.capture != nullptr ? r.capture->n_candidates : -1});
    return nullptr;
  }
  std::vector<Seen> seen;
};

// P@model's catch-up: the chunk that holds each sequence's newest KV row
// (kv_len - 1) captures that row alone, over the candidates the caller set
// (every earlier chunk captures nothing), and a sequence whose newest row
// the draft already holds is left with no captured row.
TEST(ModelDrafter, CatchUpCapturesEachSequencesNewestRow) {
  CaptureRecordingContext ctx;
  ModelDrafter drafter(ctx, 8, 2, 0, 4);  // 8 rows a pass: sequence 1's 13 rows take two
  auto a = make_sequence(1, 14), b = make_sequence(2, 4), c = make_sequence(3, 4);
  a->kv_len = 13;
  b->kv_len = 3;
  c->kv_len = 3;
  drafter.begin_round({c.get()});  // c's draft holds [0, 3) already
  ctx.seen.clear();
  std::vector<ScoreCapture> caps(3);
  for (auto *cap : {&caps[0], &caps[1], &caps[2]}) {
    cap->n_candidates = 77;
    cap->n_rows = 5;  // stale, from an earlier round
  }
  drafter.catch_up_scoring({a.get(), b.get(), c.get()}, {&caps[0], &caps[1], &caps[2]});
  EXPECT_EQ(caps[0].n_rows, 1);
  EXPECT_EQ(caps[1].n_rows, 1);
  EXPECT_EQ(caps[2].n_rows, 0) << "sequence 3's newest row did not run now";
  int32_t captured = 0;
  for (const CaptureRecordingContext::Seen &s : ctx.seen) {
    EXPECT_NE(s.seq, 3) << "the draft held sequence 3's rows";
    if (s.captured_row < 0) continue;
    ++captured;
    EXPECT_EQ(s.start + s.captured_row, (s.seq == 1 ? a : b)->kv_len - 1) << "the newest row";
    EXPECT_EQ(s.start + s.n, (s.seq == 1 ? a : b)->kv_len) << "the chunk that ends the catch-up";
    EXPECT_EQ(s.candidates, 77);
  }
  EXPECT_EQ(captured, 2);
}

}  // namespace
}  // namespace vegas
