#include "sampling/penalties.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace vegas {

void penalised_logits(const float *logits, int32_t n_vocab, const SamplingParams &params,
                      const std::vector<int32_t> &history,
                      std::vector<std::pair<int32_t, float>> *edits) {
  edits->clear();
  if (!params.has_penalties() || history.empty()) return;
  const size_t n = history.size();
  const size_t window =
      params.penalty_last_n < 0 ? n : std::min(n, static_cast<size_t>(params.penalty_last_n));
  // Sorting a copy of the window counts occurrences without a hash map.
  std::vector<int32_t> ids(history.end() - static_cast<std::ptrdiff_t>(window), history.end());
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
    const int32_t id = ids[i];
    const float count = static_cast<float>(j - i);
    float v = logits[id];
    if (params.repetition_penalty != 1.0f)
      v = v > 0.0f ? v / params.repetition_penalty : v * params.repetition_penalty;
    v -= count * params.frequency_penalty + params.presence_penalty;
    edits->emplace_back(id, v);
    i = j;
  }
}

}  // namespace vegas
