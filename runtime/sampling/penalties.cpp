#include "sampling/penalties.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace vegas {

void penalty_counts(const int32_t *history, size_t n, int32_t n_vocab, const SamplingParams &params,
                    std::vector<std::pair<int32_t, int32_t>> *counts) {
  counts->clear();
  if (!params.has_penalties() || n == 0) return;
  const size_t window =
      params.penalty_last_n < 0 ? n : std::min(n, static_cast<size_t>(params.penalty_last_n));
  // Sorting a copy of the window counts occurrences without a hash map.
  std::vector<int32_t> ids(history + (n - window), history + n);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_vocab)
      fail(VEGAS_ERR_TOKEN_OUT_OF_RANGE,
           "sampling history token " + std::to_string(n - window + i) + " is " +
               std::to_string(ids[i]) + ", outside [0, " + std::to_string(n_vocab) + ")");
  }
  std::sort(ids.begin(), ids.end());
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j < ids.size() && ids[j] == ids[i]) ++j;
    counts->emplace_back(ids[i], static_cast<int32_t>(j - i));
    i = j;
  }
}

void penalised_logits(const float *logits, int32_t n_vocab, const SamplingParams &params,
                      const std::vector<int32_t> &history,
                      std::vector<std::pair<int32_t, float>> *edits) {
  edits->clear();
  std::vector<std::pair<int32_t, int32_t>> counts;
  penalty_counts(history.data(), history.size(), n_vocab, params, &counts);
  for (const auto &c : counts) {
    const float count = static_cast<float>(c.second);
    float v = logits[c.first];
    if (params.repetition_penalty != 1.0f)
      v = v > 0.0f ? v / params.repetition_penalty : v * params.repetition_penalty;
    v -= count * params.frequency_penalty + params.presence_penalty;
    edits->emplace_back(c.first, v);
  }
}

}  // namespace vegas
