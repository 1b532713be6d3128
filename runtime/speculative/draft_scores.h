// P@model (SpecAttn, issue 24): a draft model's captured attention scores
// read as the model's, for the model's selection policy. The draft has
// layers and query heads of its own: the model's layer l reads the draft's
// layer l * draft_layers / layers and its head h the draft's head
// h * draft_heads / heads (the same relative depth and place), for every
// captured row. Lossless whatever they pick: only the drafts' sets change,
// and verification attends to everything.
#pragma once

#include <cstdint>

namespace vegas {

// Captured scores: logits [layers][rows][heads][n], lse [layers][rows][heads].
struct ScoreShape {
  int32_t layers = 0, rows = 0, heads = 0, n = 0;  // n: candidates, each row's stride
};

// Fills `to` (logits and lse, to's shape) from `from`'s; both shapes have the
// same rows and candidates (INVALID_ARGUMENT otherwise, or for empty ones).
void map_draft_scores(const float *from_logits, const float *from_lse, const ScoreShape &from,
                      float *to_logits, float *to_lse, const ScoreShape &to);

}  // namespace vegas
