// Test helper: runs the speculative decoder (runtime/speculative) of many
// policies from ONE prefill of a prompt. The prompt minus its last token is
// prefilled once into a private KV pool; each run copies that page table,
// prefills the last prompt token itself (with the score capture the policy
// needs, exactly as a session's final prefill chunk does), commits the first
// token and then does speculative rounds until max_tokens are generated.
//
// Why sharing is sound: a run only writes K/V at positions >= the shared
// prefix (the last prompt token, drafts, verified tokens), and every position
// is written before any row attends to it, so what an earlier run left in the
// slots after the prefix is never read. Runs are sequential.
#pragma once

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "sampling/sampling.h"
#include "session/sequence.h"
#include "session/sequence_kv.h"
#include "session/step_scheduler.h"
#include "speculative/speculative_decoder.h"

namespace vegas::test {

struct SpeculativeRun {
  std::vector<int32_t> generated;      // the committed tokens, first (prefill) token included
  SequenceStats stats;                 // rounds, drafted, accepted, committed
  SpeculativeTotals totals;            // the decoder's session-wide counters
  std::vector<SwitchRecord> switches;  // automatic γ/ratio switches, in order
};

class SharedPrefixRunner {
 public:
  // `max_new` bounds max_tokens of later runs and `max_gamma` their gamma (KV
  // room); kv_fp8: the fp8 KV cache (ContextParams::kv_fp8).
  SharedPrefixRunner(const Model &model, std::vector<int32_t> prompt, int32_t max_new,
                     int32_t max_gamma = 8, int32_t prefill_chunk = 512, bool kv_fp8 = false)
      : model_(model), prompt_(std::move(prompt)) {
    if (prompt_.size() < 2) throw std::invalid_argument("SharedPrefixRunner: prompt too short");
    const int32_t n = static_cast<int32_t>(prompt_.size());
    const int64_t slots = int64_t{n} + max_new + max_gamma + 2;
    ContextParams cp;
    cp.page_size = kPageSize;
    cp.num_pages = static_cast<int32_t>((slots + kPageSize - 1) / kPageSize) + 1;
    cp.max_rows = std::max(prefill_chunk, max_gamma + 1);
    cp.key_bounds = true;  // for quest; the other policies never read the bounds
    cp.kv_fp8 = kv_fp8;
    context_ = model_.backend().create_context(cp);
    kv_ = std::make_unique<SequenceKv>(cp.num_pages, kPageSize, /*prefix_cache=*/false);
    max_context_ = cp.num_pages * kPageSize;
    Sequence prefix(-1, SequenceRequest{}, nullptr);  // holds the shared prefix's pages
    kv_->reserve(prefix, n - 1);
    prefix_table_ = prefix.page_table;
    for (int32_t start = 0; start < n - 1; start += prefill_chunk) {
      SeqRows r;
      r.tokens = prompt_.data() + start;
      r.n_tokens = std::min(prefill_chunk, n - 1 - start);
      r.start_pos = start;
      r.page_table = prefix_table_.data();
      r.n_pages = static_cast<int32_t>(prefix_table_.size());
      r.logits = SeqRows::Logits::kNone;
      ForwardBatch batch;
      batch.seqs.push_back(r);
      context_->forward(batch);
    }
  }

  // One generation of max_tokens tokens (eos ignored) with `params`.
  SpeculativeRun run(const SpeculativeParams &params, const SamplingParams &sampling,
                     int32_t max_tokens) {
    SpeculativeDecoder decoder(model_.config(), params, max_context_);
    SequenceRequest req;
    req.prompt.assign(prompt_.begin(), prompt_.end());
    req.sampling = sampling;
    req.max_tokens = max_tokens;
    req.ignore_eos = true;
    Sequence seq(0, std::move(req), model_.tokenizer());
    seq.page_table = prefix_table_;
    seq.kv_len = static_cast<int32_t>(prompt_.size()) - 1;
    // Whatever happens, give back only the pages this run added.
    struct PageGuard {
      SequenceKv &kv;
      Sequence &seq;
      int32_t prefix_tokens;
      ~PageGuard() {
        kv.settle(seq, prefix_tokens - 1);  // keeps the pages of prefix_tokens positions
        seq.page_table.clear();
      }
    } guard{*kv_, seq, static_cast<int32_t>(prompt_.size()) - 1};

    auto commit = [&](Sequence &s, int32_t token, const float * /*row*/ = nullptr) {
      s.tokens.push_back(token);
      if (s.n_generated() >= s.req.max_tokens) s.finish = VEGAS_FINISH_LENGTH;
    };
    // Session::record_tuning: the decoder's tuning of the sequence, copied.
    auto record_tuning = [&](Sequence &s) {
      if (const SequenceTuning *t = decoder.sequence_tuning(s.id)) {
        s.stats.gamma = t->gamma;
        s.stats.ratio = t->ratio;
        s.stats.switches = t->switches;
      }
    };
    // The last prompt row: the final prefill chunk of a session.
    kv_->reserve(seq, seq.kv_len + 1);
    SeqRows r;
    r.tokens = prompt_.data() + seq.kv_len;
    r.n_tokens = 1;
    r.start_pos = seq.kv_len;
    r.page_table = seq.page_table.data();
    r.n_pages = static_cast<int32_t>(seq.page_table.size());
    r.logits = SeqRows::Logits::kLast;
    decoder.prepare_prefill_capture(seq, r);
    record_tuning(seq);
    ForwardBatch batch;
    batch.seqs.push_back(r);
    const float *logits = context_->forward(batch);
    kv_->advance(seq, 1);
    TokenDistribution dist;
    std::vector<int32_t> history;
    if (seq.req.sampling.has_penalties()) history.assign(seq.tokens.begin(), seq.tokens.end());
    build_distribution(logits, model_.config().vocab_size, seq.req.sampling, history, &dist);
    commit(seq, seq.req.sampling.greedy() ? dist.ids[0] : sample_from(dist, seq.rng.uniform()));
    if (!seq.finished()) decoder.select_after_prefill(seq);

    // Rounds as a session runs them (Session::speculative_round).
    StepScheduler scheduler(*kv_, SchedulingParams{});
    while (!seq.finished()) {
      std::vector<RoundSeq> round = decoder.plan({&seq}, kPageSize);
      if (!scheduler.reserve_round(round).empty()) {
        seq.finish = VEGAS_FINISH_ERROR;
        seq.status = VEGAS_ERR_KV_FULL;
        break;
      }
      std::vector<RoundOutcome> outcomes = decoder.round(round, *context_);
      for (RoundOutcome &o : outcomes) {
        o.seq->rng.set_counter(o.rng_counter);  // the round's draws, past what it commits
        o.seq->stats.rounds += 1;
        o.seq->stats.drafted += o.drafted;
        o.seq->stats.accepted += o.accepted;
        for (size_t t = 0; t < o.tokens.size() && !o.seq->finished(); ++t, ++o.committed)
          commit(*o.seq, o.tokens[t]);
        if (!o.seq->finished()) scheduler.settle(*o.seq, o.kv_len);
      }
      decoder.end_round(outcomes, *context_);
      for (const RoundOutcome &o : outcomes) {
        o.seq->stats.committed += o.committed;
        record_tuning(*o.seq);
      }
    }
    if (seq.status != VEGAS_OK)
      throw std::runtime_error(std::string("speculative run failed: ") +
                               vegas_status_name(seq.status));
    SpeculativeRun out;
    out.generated.assign(seq.tokens.begin() + seq.n_prompt(), seq.tokens.end());
    out.stats = seq.stats;
    out.totals = decoder.totals();
    for (int64_t i = 0; i < decoder.tuning().switches(); ++i)
      if (const SwitchRecord *s = decoder.tuning().switch_at(i)) out.switches.push_back(*s);
    return out;
  }

 private:
  static constexpr int32_t kPageSize = 16;

  const Model &model_;
  std::vector<int32_t> prompt_;
  std::unique_ptr<BackendContext> context_;
  std::unique_ptr<SequenceKv> kv_;
  std::vector<int32_t> prefix_table_;
  int32_t max_context_ = 0;
};

}  // namespace vegas::test
