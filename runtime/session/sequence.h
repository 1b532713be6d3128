// One generation request inside a session: its tokens, KV page table, sampling
// state, stop rules, streaming text and statistics.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mi_allocator.h"
#include "kv/kv_pool.h"
#include "sampling/logprobs.h"
#include "sampling/sampling.h"
#include "session/stop_filter.h"
#include "tokenizer/tokenizer.h"
#include "vegas.h"

namespace vegas {

struct SequenceRequest {
  MiVector<int32_t> prompt;
  SamplingParams sampling;
  int32_t max_tokens = 128;
  bool ignore_eos = false;
  MiVector<int32_t> stop_ids;
  std::vector<std::string> stop_strings;
  vegas_token_fn on_token = nullptr;
  void *user_data = nullptr;
  // Record each generated token's log-probability and its `top_logprobs`
  // most probable alternatives (0 .. kMaxTopLogprobs). Such a sequence's
  // logit rows come to the host whole.
  bool logprobs = false;
  int32_t top_logprobs = 0;
  // Of the processed distribution (VEGAS_LOGPROBS_PROCESSED), not the raw logits.
  bool processed_logprobs = false;
};

constexpr int32_t kMaxTopLogprobs = VEGAS_MAX_TOP_LOGPROBS;

// Written only by the session (session.cpp), each field by one function:
// the times by count_seconds; rounds, drafted and accepted by begin_outcome
// and committed by speculative_round, from the round's RoundOutcome; gamma,
// ratio and switches by record_tuning, a copy of the decoder's tuning.
struct SequenceStats {
  int64_t rounds = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  int64_t committed = 0;  // tokens committed by speculative rounds
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
  // VEGAS mode: the γ and ratio it drafts with now, and its automatic switches.
  int32_t gamma = 0;
  float ratio = 0.0f;
  int64_t switches = 0;
};

struct Sequence {
  Sequence(int32_t seq_id, SequenceRequest request, const Tokenizer &tokenizer)
      : Sequence(seq_id, std::move(request), &tokenizer) {}
  // `tokenizer` null (synthetic model): tokens only, no text.
  Sequence(int32_t seq_id, SequenceRequest request, const Tokenizer *tokenizer)
      : id(seq_id),
        req(std::move(request)),
        tokens(req.prompt),
        rng(req.sampling.seed),
        stop_filter(req.stop_strings) {
    if (tokenizer != nullptr) detokenizer.emplace(*tokenizer, /*skip_special=*/true);
  }

  bool finished() const { return finish != VEGAS_FINISH_NONE; }
  int32_t n_prompt() const { return static_cast<int32_t>(req.prompt.size()); }
  int32_t n_generated() const { return static_cast<int32_t>(tokens.size()) - n_prompt(); }
  // Rows not yet in the KV cache (prompt still to prefill, or the newest token).
  int32_t pending_rows() const { return static_cast<int32_t>(tokens.size()) - kv_len; }

  int32_t id;
  SequenceRequest req;
  MiVector<int32_t> tokens;  // prompt + generated (stop tokens excluded)
  // With req.logprobs: one entry per generated token of `tokens`.
  std::vector<TokenLogprobs> logprobs;
  // Written only by SequenceKv (session/sequence_kv.h):
  int32_t kv_len = 0;  // leading tokens whose K/V are in the pool
  std::vector<int32_t> page_table;
  KvPool::PublishCursor published;  // of page_table's pages, those in the prefix cache
  // Written only by the session: its own draws (plain and chained steps) and
  // a round's RoundOutcome::rng_counter (the decoder draws on a copy).
  Rng rng;
  std::optional<StreamingDetokenizer> detokenizer;
  StopFilter stop_filter;
  MiString text;  // the emitted completion
  vegas_finish_reason finish = VEGAS_FINISH_NONE;
  vegas_status status = VEGAS_OK;
  SequenceStats stats;
};

}  // namespace vegas
