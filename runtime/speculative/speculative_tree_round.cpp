// The token-tree parts of a speculative round (SpeculativeDecoder, trees()):
// drafting a tree level by level, accepting a path of it, and moving that
// path's K/V into place. The rest of the round is the chain's.
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/parallel_rows.h"
#include "speculative/round_state.h"
#include "speculative/speculative_decoder.h"

namespace vegas {

namespace {

// The children of a greedy node: the rule's argmax, then the next best
// logits of the row (the draft's ranking; greedy acceptance needs no q).
std::vector<int32_t> greedy_children(const TokenDistribution &q, const LogitCandidates &c,
                                     int32_t n) {
  std::vector<int32_t> order(c.ids.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const float la = c.logits[static_cast<size_t>(a)], lb = c.logits[static_cast<size_t>(b)];
    return la != lb ? la > lb : c.ids[static_cast<size_t>(a)] < c.ids[static_cast<size_t>(b)];
  });
  std::vector<int32_t> children{q.ids[0]};
  for (size_t i = 0; i < order.size() && static_cast<int32_t>(children.size()) < n; ++i) {
    const int32_t id = c.ids[static_cast<size_t>(order[i])];
    if (id != q.ids[0]) children.push_back(id);
  }
  return children;
}

}  // namespace

int32_t SpeculativeDecoder::max_verify_rows() const {
  if (!trees()) return max_gamma() + 1;
  return static_cast<int32_t>(
      std::min<int64_t>(max_tree_nodes(params_.tree, max_gamma()), int64_t{1} << 30));
}

void SpeculativeDecoder::check_tree_shape() const {
  const DraftTreeShape &t = params_.tree;
  if (t.branches < 1 || t.branches > kMaxTreeBranches || t.branch_depth < 0 || t.branch_depth > 32)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "token tree of " + std::to_string(t.branches) +
                                         " branches over " + std::to_string(t.branch_depth) +
                                         " levels: branches must be in [1, " +
                                         std::to_string(kMaxTreeBranches) + "], levels in [0, 32]");
  if (!trees()) return;
  if (own_ == DrafterKind::kModel)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "token trees are drafted by the model's own sparse passes, not by a draft model (yet)");
  if (drafts_by(DrafterKind::kLookup) || alternate_)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "policy '" + params_.policy +
                                         "': token trees are drafted by the model's sparse "
                                         "passes, not by prompt lookup");
  if (query_aware_)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "policy '" + params_.policy +
                                         "' selects inside each one-row draft pass; token trees "
                                         "draft several rows a pass");
  const int64_t nodes = max_tree_nodes(t, max_gamma());
  if (nodes > kMaxTreeNodes)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "a token tree of " + std::to_string(t.branches) +
                                         " branches over " + std::to_string(t.branch_depth) +
                                         " levels and gamma up to " + std::to_string(max_gamma()) +
                                         " has " + std::to_string(nodes) + " nodes, more than " +
                                         std::to_string(kMaxTreeNodes));
}

void SpeculativeDecoder::tree_history(const RoundWork &w, int32_t node, std::vector<int32_t> *out) {
  out->clear();
  if (!w.seq->req.sampling.has_penalties()) return;
  out->assign(w.seq->tokens.begin(), w.seq->tokens.end());
  for (const int32_t n : w.tree.path_to(node)) out->push_back(w.tree.token(n));
}

void SpeculativeDecoder::tree_levels(std::vector<RoundWork> &work, int32_t max_gamma,
                                     BackendContext &context, RoundState &rs) {
  const int32_t vocab = config_.vocab_size;
  for (RoundWork &w : work) {
    w.tree = DraftTree(w.seq->tokens.back());
    w.node_q.clear();
  }
  for (int32_t level = 0; level < max_gamma; ++level) {
    ForwardBatch batch;
    std::vector<RoundWork *> in_batch;
    std::vector<size_t> first_row;
    size_t rows = 0;
    rs.cand_k.clear();
    for (RoundWork &w : work) {
      if (level >= w.gamma) continue;
      const int32_t begin = w.tree.level_begin(level), end = w.tree.level_end(level);
      w.rows = TokenTree{w.seq->kv_len, w.tree.parents(), w.tree.n_nodes()};
      SeqRows r = draft_row(w, 0, w.tree.tokens() + begin, false);  // trees: no draft model
      r.n_tokens = end - begin;
      r.start_pos = w.seq->kv_len + begin;
      r.logits = SeqRows::Logits::kAll;
      r.tree = &w.rows;
      batch.seqs.push_back(r);
      in_batch.push_back(&w);
      first_row.push_back(rows);
      rows += static_cast<size_t>(r.n_tokens);
      // A greedy node that branches ranks more of its row than its argmax.
      const int32_t k =
          w.seq->req.sampling.greedy() ? std::max(w.k, w.shape.children_at(level)) : w.k;
      rs.cand_k.insert(rs.cand_k.end(), static_cast<size_t>(r.n_tokens), k);
    }
    const float *logits = nullptr;
    if (rs.by_candidates)
      rs.cands.run(context, batch, rs.cand_k, vocab);
    else
      logits = context.forward(batch);
    parallel_rows(
        static_cast<int64_t>(in_batch.size()),
        [&](int64_t b) {
          grow_tree_level(*in_batch[static_cast<size_t>(b)], level, rs, logits,
                          first_row[static_cast<size_t>(b)]);
        },
        !(rs.by_candidates && rs.cands.picked()) || in_batch.size() >= threaded_round_seqs());
  }
}

void SpeculativeDecoder::grow_tree_level(RoundWork &w, int32_t level, RoundState &rs,
                                         const float *logits, size_t first_row) {
  const int32_t vocab = config_.vocab_size;
  const SamplingParams &rule = w.seq->req.sampling;
  const int32_t begin = w.tree.level_begin(level), end = w.tree.level_end(level);
  const int32_t n_children = w.shape.children_at(level);
  w.node_q.resize(static_cast<size_t>(w.tree.n_nodes()));
  std::vector<std::vector<int32_t>> children(static_cast<size_t>(end - begin));
  LogitCandidates ranked;
  for (int32_t node = begin; node < end; ++node) {
    const size_t row = first_row + static_cast<size_t>(node - begin);
    TokenDistribution &q = w.node_q[static_cast<size_t>(node)];
    rs.row_distribution(
        logits, static_cast<int64_t>(row), vocab, rule,
        [&](std::vector<int32_t> *h) { tree_history(w, node, h); }, &q);
    std::vector<int32_t> &c = children[static_cast<size_t>(node - begin)];
    if (!rule.greedy()) {
      c = draw_without_replacement(q, n_children, w.rng);
    } else if (n_children == 1) {
      c = {q.ids[0]};
    } else {
      if (!rs.by_candidates)
        extract_candidates(logits + static_cast<int64_t>(row) * vocab, vocab, n_children, &ranked);
      c = greedy_children(q, rs.by_candidates ? rs.cands.row(row) : ranked, n_children);
    }
  }
  w.tree.begin_level();
  for (int32_t node = begin; node < end; ++node)
    for (const int32_t token : children[static_cast<size_t>(node - begin)])
      w.tree.add_child(node, token);
}

void SpeculativeDecoder::accept_tree(RoundWork &w, RoundState &rs, int64_t base,
                                     AcceptResult *result) {
  const int32_t vocab = config_.vocab_size;
  const SamplingParams &rule = w.seq->req.sampling;
  std::vector<TokenDistribution> p(static_cast<size_t>(w.tree.n_nodes()));
  auto target = [&](int32_t node) -> const TokenDistribution & {
    TokenDistribution &d = p[static_cast<size_t>(node)];
    rs.row_distribution(
        rs.vlogits, base + node, vocab, rule,
        [&](std::vector<int32_t> *h) { tree_history(w, node, h); }, &d);
    return d;
  };
  if (rule.greedy())
    accept_tree_greedy(
        w.tree, [&](int32_t node) { return target(node).ids[0]; }, &w.tree_result);
  else
    accept_tree_sampled(
        w.tree, w.node_q, target, w.rng, &w.tree_result,
        params_.debug_broken_residual ? ResidualRule::kBrokenFromTarget : ResidualRule::kLossless);
  result->n_accepted = w.tree_result.n_accepted();
  result->tokens = w.tree_result.tokens;
}

void SpeculativeDecoder::compact_trees(const std::vector<RoundWork> &work,
                                       BackendContext &context) {
  std::vector<int32_t> from, to;
  for (const RoundWork &w : work) {
    if (!w.in_tree) continue;
    // The k-th accepted node (slot base + node) holds position base + k; the
    // nodes ascend, so no move overwrites a later one's source.
    from.clear();
    to.clear();
    const int32_t base = w.seq->kv_len;
    const std::vector<int32_t> &path = w.tree_result.path;
    for (size_t k = 0; k < path.size(); ++k) {
      if (path[k] == static_cast<int32_t>(k) + 1) continue;
      from.push_back(base + path[k]);
      to.push_back(base + static_cast<int32_t>(k) + 1);
    }
    if (from.empty()) continue;
    KvMove move;
    move.page_table = w.seq->page_table.data();
    move.n_pages = static_cast<int32_t>(w.seq->page_table.size());
    move.from = from.data();
    move.to = to.data();
    move.n = static_cast<int32_t>(from.size());
    context.move_kv(move);
  }
}

}  // namespace vegas
