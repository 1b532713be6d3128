// Chained vanilla decode steps (SessionParams::vanilla_chain): the backend
// runs several decode steps of a batch in one call, each drawing its tokens on
// the device with the sequences' own rules and RNG counters and feeding them
// to the next (BackendContext::forward_draft_chain with dense rows), and the
// host commits them step by step afterwards. The tokens, the K/V and the RNG
// use are those of as many separate steps; only the host's share of a step
// (staging, launch, synchronisation, download) is paid once per chain.
#include <algorithm>
#include <vector>

#include "common/error.h"
#include "session/session.h"

namespace vegas {

int64_t Session::chained_vanilla_steps(const std::vector<Sequence *> &seqs) {
  if (params_.vanilla_chain < 2 || seqs.empty() || !context_->chains_passes()) return -1;
  // No sequence runs past its last token: near a sequence's max_tokens the
  // chain is shorter (a server's batch nearly always holds one near its end).
  int32_t steps = params_.vanilla_chain;
  for (const Sequence *seq : seqs)
    steps = std::min(steps, seq->req.max_tokens - seq->n_generated());
  if (steps < 2) return -1;
  std::vector<RowSampling> rules;
  std::vector<int32_t> k;
  for (const Sequence *seq : seqs) {
    // A chain draws from each row's candidates: rules that read only the top
    // of a row, without penalties (their history changes inside the chain);
    // logprobs need whole rows.
    const int32_t rule_k = candidate_k(seq->req.sampling);
    if (rule_k <= 0 || seq->req.sampling.has_penalties() || seq->req.logprobs) return -1;
    RowSampling rule;
    rule.params = &seq->req.sampling;
    rule.rng_counter = seq->rng.counter();
    rules.push_back(rule);
    k.push_back(rule_k);
  }
  // KV room for every step of every sequence, or plain steps (which end the
  // sequences that do not fit with KV_FULL).
  if (!scheduler_.reserve_chain(seqs, steps)) return -1;
  ForwardBatch first;
  for (Sequence *seq : seqs) first.seqs.push_back(pending_rows(*seq, 1));  // the newest token
  const size_t n = seqs.size();
  std::vector<int32_t> tokens(static_cast<size_t>(steps) * n);
  std::vector<LogitCandidates> cands;
  if (!context_->forward_draft_chain(first, steps, rules.data(), k.data(), tokens.data(), &cands))
    return -1;  // the K/V it may have written is what the plain step writes again
  chained_steps_ += steps;

  int64_t committed = 0;
  for (int32_t j = 0; j < steps; ++j) {
    for (size_t i = 0; i < n; ++i) {
      Sequence &seq = *seqs[i];
      if (seq.finished()) continue;  // stopped earlier in the chain, or cancelled by a callback
      scheduler_.advance(seq, 1);
      // Draw j used the counter it was given plus j; the next step starts after it.
      if (!seq.req.sampling.greedy()) seq.rng.set_counter(rules[i].rng_counter + j + 1);
      commit_token(seq, tokens[static_cast<size_t>(j) * n + i], nullptr);
      ++committed;
    }
  }
  return committed;
}

}  // namespace vegas
