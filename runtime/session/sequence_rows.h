// A sequence's rows in a forward pass (backend.h's SeqRows), over the
// sequence's own page table. Callers add what else the rows carry (a sparse
// set, a score capture, a tree).
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "session/sequence.h"

namespace vegas {

// `n_tokens` tokens from position `start_pos` on.
inline SeqRows sequence_rows(const Sequence &seq, const int32_t *tokens, int32_t n_tokens,
                             int32_t start_pos, SeqRows::Logits logits) {
  SeqRows r;
  r.tokens = tokens;
  r.n_tokens = n_tokens;
  r.start_pos = start_pos;
  r.page_table = seq.page_table.data();
  r.n_pages = static_cast<int32_t>(seq.page_table.size());
  r.logits = logits;
  return r;
}

}  // namespace vegas
