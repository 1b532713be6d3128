#include "speculative/lookup_drafter.h"

#include "common/parallel_rows.h"

namespace vegas {

void LookupDrafter::begin_prompt(const Sequence &seq) {
  Drafting &d = drafting_[seq.id];
  if (d.prompt_indexed.valid() || d.index.indexed_size() > 0) return;
  // A copy: the session appends to seq.tokens while this runs.
  d.prompt_indexed = indexer_.submit(
      [&index = d.index, prompt = std::vector<int32_t>(seq.tokens.begin(), seq.tokens.end())] {
        index.extend(prompt.data(), prompt.size());
      });
}

std::vector<std::vector<int32_t>> LookupDrafter::propose(const std::vector<const Sequence *> &seqs,
                                                         const std::vector<int32_t> &gammas) {
  std::vector<PromptLookupIndex *> indexes;
  bool long_extension = false;
  for (const Sequence *seq : seqs) {
    Drafting &d = drafting_[seq->id];
    if (d.prompt_indexed.valid()) d.prompt_indexed.get();
    indexes.push_back(&d.index);
    long_extension = long_extension || seq->tokens.size() > d.index.indexed_size() + 512;
  }
  std::vector<std::vector<int32_t>> drafts(seqs.size());
  parallel_rows(
      static_cast<int64_t>(seqs.size()),
      [&](int64_t i) {
        const Sequence &seq = *seqs[static_cast<size_t>(i)];
        PromptLookupIndex &index = *indexes[static_cast<size_t>(i)];
        index.extend(seq.tokens.data(), seq.tokens.size());
        drafts[static_cast<size_t>(i)] =
            index.propose(seq.tokens.data(), seq.tokens.size(), gammas[static_cast<size_t>(i)]);
      },
      long_extension);
  return drafts;
}

void LookupDrafter::forget(int32_t seq_id) {
  if (auto it = drafting_.find(seq_id); it != drafting_.end()) {
    // The indexing task writes the entry: it must be done before it goes.
    if (it->second.prompt_indexed.valid()) it->second.prompt_indexed.wait();
    drafting_.erase(it);
  }
}

}  // namespace vegas
