// What the phases of one speculative round share (RoundState) and how a
// pass's logit rows reach the host (PassCandidates); private to the
// speculative decoder's and the drafters' files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "sampling/sampling.h"
#include "speculative/round_work.h"

namespace vegas {

// The logit rows of one pass as candidates (sampling.h): the backend's when
// it picks them where the logits are, else cut down here from the whole rows,
// one row at a time when it is first needed (verify rows after a rejection
// never are). Rows may be read from several threads, each row by one.
class PassCandidates {
 public:
  // `meanwhile` (may be empty; it must not use `context`) runs while the
  // pass runs on a backend that can begin it and wait later, else before it.
  void run(BackendContext &context, const ForwardBatch &batch, std::vector<int32_t> k,
           int32_t vocab, const std::function<void()> &meanwhile = {}) {
    k_ = std::move(k);
    vocab_ = vocab;
    logits_ = nullptr;
    bool picked = false;
    if (meanwhile && context.begin_candidates(batch, k_.data())) {
      end_begun(context, meanwhile);
      picked = true;
    } else {
      if (meanwhile) meanwhile();
      picked = context.forward_candidates(batch, k_.data(), &cands_);
    }
    if (!picked) logits_ = context.forward(batch);
    cands_.resize(k_.size());
    ready_.assign(k_.size(), picked ? 1 : 0);
    picked_ = picked;
  }
  // run() with the batch's tokens fed on the device (begin_candidates' `fed`)
  // and `meanwhile` run while it runs; false, having done nothing, when the
  // backend cannot begin such a pass.
  // `accept` (may be null): the acceptance to run on the device behind the
  // pass (BackendContext::begin_accept); accept_begun() tells whether it was.
  bool run_fed(BackendContext &context, const ForwardBatch &batch, std::vector<int32_t> k,
               int32_t vocab, const int32_t *fed,
               const std::vector<BackendContext::AcceptOnDevice> *accept,
               const std::function<void()> &meanwhile) {
    k_ = std::move(k);
    vocab_ = vocab;
    logits_ = nullptr;
    accept_begun_ = false;
    if (!context.begin_candidates(batch, k_.data(), fed)) return false;
    accept_begun_ = accept != nullptr && context.begin_accept(*accept);
    end_begun(context, meanwhile);
    cands_.resize(k_.size());
    ready_.assign(k_.size(), 1);
    picked_ = true;
    return true;
  }
  // Whether the backend picked them: the rows are then cheap (~0.3 us a
  // distribution), not worth waking threads for.
  bool picked() const { return picked_; }
  bool accept_begun() const { return accept_begun_; }
  const LogitCandidates &row(size_t i) {
    if (!ready_[i]) {
      extract_candidates(logits_ + static_cast<int64_t>(i) * vocab_, vocab_, k_[i], &cands_[i]);
      ready_[i] = 1;
    }
    return cands_[i];
  }

 private:
  std::vector<int32_t> k_;
  int32_t vocab_ = 0;
  const float *logits_ = nullptr;
  std::vector<LogitCandidates> cands_;
  std::vector<char> ready_;
  bool picked_ = false;
  bool accept_begun_ = false;

  // A begun pass: `meanwhile`, then its candidates. The pass is ended even
  // when `meanwhile` throws (its results then dropped).
  void end_begun(BackendContext &context, const std::function<void()> &meanwhile) {
    try {
      meanwhile();
    } catch (...) {
      try {
        context.end_candidates(&cands_);
      } catch (...) {  // the first error is the one to report
      }
      throw;
    }
    context.end_candidates(&cands_);
  }
};

// Rows built from picked candidates cost ~0.3 us each: threads pay only from
// this many sequences on (a round of 64 builds ~830 distributions; at 16 the
// team's wake-up cost more than the rows on the 2-core machine that measured it).
// VEGAS_ROUND_THREAD_SEQS=N sets another threshold (A/B on other machines).
size_t threaded_round_seqs();

// What the phases of one round share: how the passes return their rows,
// the chain begun for the drafts, the device's acceptance records.
struct RoundState {
  // When every rule reads only the top of its logit rows (greedy, or top-k
  // up to kMaxCandidateTopK, no penalties), the draft and verify passes
  // return those candidates instead of the vocabulary rows: on a GPU, a few
  // pairs per row cross to the host instead of the row, and the host builds
  // each distribution from them.
  bool by_candidates = true;
  PassCandidates cands;
  std::vector<int32_t> cand_k;
  const float *vlogits = nullptr;  // the verify rows, when not by candidates
  ChainedDrafts chain;
  bool chain_begun = false, chain_read = false;
  std::vector<BackendContext::AcceptedOnDevice> accepted;  // empty: the host accepts
  std::vector<int64_t> row_base;                           // each sequence's first verify row
  std::vector<std::vector<int32_t>> verify_tokens;

  // The distribution under `rule` of logit row `row` of the last pass: from
  // its candidates when by_candidates (no penalties then), else from the
  // whole row of `logits` with the penalties' history `history(&h)` fills
  // (called only then).
  template <typename HistoryFn>
  void row_distribution(const float *logits, int64_t row, int32_t vocab, const SamplingParams &rule,
                        HistoryFn &&history, TokenDistribution *out) {
    if (by_candidates) {
      build_distribution_from_candidates(cands.row(static_cast<size_t>(row)), rule, out);
      return;
    }
    std::vector<int32_t> h;
    history(&h);
    build_distribution(logits + row * vocab, vocab, rule, h, out);
  }
};

}  // namespace vegas
