#include "session/step_scheduler.h"

#include <algorithm>

#include "common/error.h"

namespace vegas {

StepPlan StepScheduler::plan(const std::map<int32_t, std::unique_ptr<Sequence>> &sequences,
                             const ChooseKind &choose) const {
  StepPlan plan;
  bool prompts_pending = false;
  for (const auto &entry : sequences)
    prompts_pending =
        prompts_pending || (!entry.second->finished() && entry.second->pending_rows() > 1);
  if (!(params_.prefill_first && prompts_pending)) {
    for (const auto &entry : sequences) {
      Sequence &seq = *entry.second;
      if (seq.finished() || seq.pending_rows() != 1) continue;
      if (static_cast<int32_t>(plan.decoding.size()) >= params_.max_batch) break;
      plan.decoding.push_back(&seq);
    }
  }
  plan.kind = plan.decoding.empty() ? ModeChooser::Kind::kVanilla : choose(plan.decoding);
  if (plan.kind == ModeChooser::Kind::kVanilla) {
    plan.forward = plan.decoding;
    plan.rows.assign(plan.decoding.size(), 1);
  }
  int32_t prefill_budget = params_.prefill_chunk;
  for (const auto &entry : sequences) {
    Sequence &seq = *entry.second;
    if (prefill_budget == 0) break;
    if (seq.finished() || seq.pending_rows() <= 1) continue;
    if (static_cast<int32_t>(plan.forward.size()) >= params_.max_batch) break;
    const int32_t rows = std::min(prefill_budget, seq.pending_rows());
    plan.forward.push_back(&seq);
    plan.rows.push_back(rows);
    prefill_budget -= rows;
  }
  return plan;
}

bool StepScheduler::try_reserve(Sequence &seq, int64_t positions) {
  try {
    kv_.reserve(seq, positions);
    return true;
  } catch (const Error &e) {
    if (e.status() != VEGAS_ERR_KV_FULL) throw;
    return false;
  }
}

std::vector<Sequence *> StepScheduler::reserve_forward(StepPlan &plan) {
  std::vector<Sequence *> full, kept;
  std::vector<int32_t> rows;
  for (size_t i = 0; i < plan.forward.size(); ++i) {
    Sequence *seq = plan.forward[i];
    if (!try_reserve(*seq, int64_t{seq->kv_len} + plan.rows[i])) {
      full.push_back(seq);
      continue;
    }
    kept.push_back(seq);
    rows.push_back(plan.rows[i]);
  }
  plan.forward = std::move(kept);
  plan.rows = std::move(rows);
  return full;
}

std::vector<Sequence *> StepScheduler::reserve_round(std::vector<RoundSeq> &round) {
  std::vector<Sequence *> full;
  std::vector<RoundSeq> kept;
  for (RoundSeq &r : round) {
    if (!try_reserve(*r.seq, r.reserve)) {
      full.push_back(r.seq);
      continue;
    }
    kept.push_back(r);
  }
  // The chain's extra drafts only where every position fits: one that does
  // not leaves its sequence drafting pass by pass (and so the whole round).
  for (RoundSeq &r : kept) r.chain_room = try_reserve(*r.seq, r.chain_reserve);
  // Likewise a tree: one that does not fit drafts a chain.
  for (RoundSeq &r : kept) r.tree_room = try_reserve(*r.seq, r.tree_reserve);
  // And a wide lookup round: a sequence that does not fit drafts its γ.
  for (RoundSeq &r : kept)
    r.lookup_room = r.lookup_gamma > 0 && try_reserve(*r.seq, r.lookup_reserve);
  round = std::move(kept);
  return full;
}

bool StepScheduler::reserve_chain(const std::vector<Sequence *> &seqs, int32_t steps) {
  for (Sequence *seq : seqs)
    if (!try_reserve(*seq, int64_t{seq->kv_len} + steps)) return false;
  return true;
}

}  // namespace vegas
