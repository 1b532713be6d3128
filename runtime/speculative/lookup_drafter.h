// Prompt lookup drafting (the policy "lookup", and the lookup rounds of
// "P+lookup"): each sequence's drafts come from its own context through an
// n-gram index (prompt_lookup.h). A prompt is indexed on a background thread
// from its last prefill chunk on (the host is idle while the device
// prefills); each round adds the few tokens committed since. Prompts are
// spread over a few such threads (kIndexers at most): an 8K prompt takes
// ~0.3-0.5 ms, and 64 of them in a row on one thread were still indexing when
// the first lookup round came, which waited ~8 ms for them (H200, 8K x 64).
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <vector>

#include "common/serial_worker.h"
#include "session/sequence.h"
#include "speculative/drafter.h"
#include "speculative/prompt_lookup.h"

namespace vegas {

class LookupDrafter final : public Drafter {
 public:
  DrafterKind kind() const override { return DrafterKind::kLookup; }
  bool drafts_without_passes() const override { return true; }
  // Starts indexing the prompt of `seq` (a copy of its tokens), once.
  void begin_prompt(const Sequence &seq) override;
  // Each sequence's drafts from its own context (propose), as many as it
  // finds up to its γ, each with q one-hot.
  void draft(RoundDrafting &round) override;
  // Up to gammas[i] drafts for seqs[i] from its own context (fewer, or none,
  // where the context does not continue its last tokens). A sequence whose
  // prompt was not indexed is indexed here, on the worker threads when long.
  std::vector<std::vector<int32_t>> propose(const std::vector<const Sequence *> &seqs,
                                            const std::vector<int32_t> &gammas);
  // Drops the sequence's index: on the thread that indexed its prompt, after
  // that task (freeing an 8K prompt's tables took ~0.2 ms, in the round that
  // finished the sequence).
  void forget(int32_t seq_id) override;

 private:
  struct Drafting {
    PromptLookupIndex index;
    std::future<void> prompt_indexed;
    SerialWorker *indexer = nullptr;  // the one indexing the prompt
  };
  static constexpr int kIndexers = 4;
  SerialWorker &next_indexer();

  std::map<int32_t, Drafting> drafting_;
  // After drafting_: destroyed first, they finish the tasks that write there.
  // Made on the first prompt (one per hardware thread beyond the first, at
  // most kIndexers); each starts its thread with its first task.
  std::vector<std::unique_ptr<SerialWorker>> indexers_;
  size_t next_indexer_ = 0;
};

}  // namespace vegas
