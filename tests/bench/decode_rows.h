// The CUDA benchmarks' decode batch: one row per sequence at position
// `context`, sequence s owning pages [s * pages_per_seq, (s + 1) * pages_per_seq)
// and fed a fixed pseudo-random token.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace vegas::bench {

struct DecodeRows {
  std::vector<std::vector<int32_t>> tables;
  std::vector<int32_t> tokens;
  ForwardBatch batch;  // points into tables and tokens
};

inline void make_decode_rows(int batch, int pages_per_seq, int context, int vocab,
                             DecodeRows *out) {
  out->tables.assign(batch, {});
  out->tokens.resize(batch);
  out->batch.seqs.clear();
  for (int s = 0; s < batch; ++s) {
    for (int i = 0; i < pages_per_seq; ++i) out->tables[s].push_back(s * pages_per_seq + i);
    out->tokens[s] = (s * 7919 + 13) % vocab;
    SeqRows r;
    r.tokens = &out->tokens[s];
    r.n_tokens = 1;
    r.start_pos = context;
    r.page_table = out->tables[s].data();
    r.n_pages = pages_per_seq;
    out->batch.seqs.push_back(r);
  }
}

}  // namespace vegas::bench
