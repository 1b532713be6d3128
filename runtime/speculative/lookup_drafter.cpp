#include "speculative/lookup_drafter.h"

#include <algorithm>
#include <utility>

#include "common/parallel_rows.h"
#include "common/worker_pool.h"

namespace vegas {

SerialWorker &LookupDrafter::next_indexer() {
  if (indexers_.empty()) {
    const int n = std::clamp(hardware_threads() - 1, 1, kIndexers);
    for (int i = 0; i < n; ++i) indexers_.push_back(std::make_unique<SerialWorker>());
  }
  return *indexers_[next_indexer_++ % indexers_.size()];
}

void LookupDrafter::begin_prompt(const Sequence &seq) {
  Drafting &d = drafting_[seq.id];
  if (d.prompt_indexed.valid() || d.index.indexed_size() > 0) return;
  // A copy: the session appends to seq.tokens while this runs.
  d.indexer = &next_indexer();
  d.prompt_indexed = d.indexer->submit(
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

void LookupDrafter::draft(RoundDrafting &round) {
  std::vector<RoundWork> &work = round.work;
  std::vector<const Sequence *> seqs;
  std::vector<int32_t> gammas;
  for (const RoundWork &w : work) {
    seqs.push_back(w.seq);
    gammas.push_back(w.gamma);
  }
  std::vector<std::vector<int32_t>> drafts = propose(seqs, gammas);
  for (size_t i = 0; i < work.size(); ++i) {
    RoundWork &w = work[i];
    w.drafts = std::move(drafts[i]);
    w.gamma = static_cast<int32_t>(w.drafts.size());
    // A proposal that is certain: accepted with probability p(x), and after a
    // rejection the next token is drawn from p without x (accept_sampled's
    // norm(max(0, p - q))), so the output stays distributed as vanilla's.
    w.q.assign(w.drafts.size(), TokenDistribution{});
    for (size_t j = 0; j < w.drafts.size(); ++j) {
      w.q[j].ids = {w.drafts[j]};
      w.q[j].probs = {1.0f};
    }
  }
}

void LookupDrafter::forget(int32_t seq_id) {
  auto it = drafting_.find(seq_id);
  if (it == drafting_.end()) return;
  // The node keeps its address out of the map: the indexing task, which
  // writes its index, runs before this one on the same thread.
  SerialWorker &worker = it->second.indexer ? *it->second.indexer : next_indexer();
  auto node = std::make_shared<decltype(drafting_)::node_type>(drafting_.extract(it));
  worker.submit([node]() mutable { node.reset(); });
}

}  // namespace vegas
