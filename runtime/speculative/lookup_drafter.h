// Prompt lookup drafting (the policy "lookup", and the lookup rounds of
// "P+lookup"): each sequence's drafts come from its own context through an
// n-gram index (prompt_lookup.h). A prompt is indexed on a background thread
// from its last prefill chunk on (the host is idle while the device
// prefills); each round adds the few tokens committed since.
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <vector>

#include "common/serial_worker.h"
#include "session/sequence.h"
#include "speculative/prompt_lookup.h"

namespace vegas {

class LookupDrafter {
 public:
  // Starts indexing the prompt of `seq` (a copy of its tokens), once.
  void begin_prompt(const Sequence &seq);
  // Up to gammas[i] drafts for seqs[i] from its own context (fewer, or none,
  // where the context does not continue its last tokens). A sequence whose
  // prompt was not indexed is indexed here, on the worker threads when long.
  std::vector<std::vector<int32_t>> propose(const std::vector<const Sequence *> &seqs,
                                            const std::vector<int32_t> &gammas);
  // Drops the sequence's index, after its indexing task.
  void forget(int32_t seq_id);

 private:
  struct Drafting {
    PromptLookupIndex index;
    std::future<void> prompt_indexed;
  };
  std::map<int32_t, Drafting> drafting_;
  // After drafting_: destroyed first, it finishes the tasks that write there.
  SerialWorker indexer_;
};

}  // namespace vegas
