// Repetition, presence and frequency penalties (the first logit rule of
// build_distribution; see sampling.h for the order of the rules).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "sampling/sampling.h"

namespace vegas {

// For every distinct token among the last params.penalty_last_n ids of
// `history`, its penalised logit: repetition first (logit > 0 ? logit / r :
// logit * r), then logit -= count * frequency + presence. `edits` is sorted by
// id. Throws TOKEN_OUT_OF_RANGE for a history id outside [0, n_vocab).
void penalised_logits(const float *logits, int32_t n_vocab, const SamplingParams &params,
                      const std::vector<int32_t> &history,
                      std::vector<std::pair<int32_t, float>> *edits);

// The distinct tokens among the last params.penalty_last_n ids of `history`
// (n ids) and their counts, sorted by id: what the penalties above read. Empty
// when params has no penalties. Throws TOKEN_OUT_OF_RANGE like penalised_logits.
void penalty_counts(const int32_t *history, size_t n, int32_t n_vocab, const SamplingParams &params,
                    std::vector<std::pair<int32_t, int32_t>> *counts);

}  // namespace vegas
