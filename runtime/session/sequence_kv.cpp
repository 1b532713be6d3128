#include "session/sequence_kv.h"

#include <string>

#include "common/error.h"

namespace vegas {

void SequenceKv::attach_prefix(Sequence &seq, int64_t max_tokens) {
  seq.kv_len = static_cast<int32_t>(
      pool_.attach_prefix(seq.page_table, seq.tokens.data(), max_tokens, &seq.published));
}

void SequenceKv::reserve(Sequence &seq, int64_t positions) {
  pool_.reserve(seq.page_table, positions);
}

void SequenceKv::advance(Sequence &seq, int32_t rows) {
  if (rows < 0 || int64_t{seq.kv_len} + rows >
                      int64_t{pool_.page_size()} * static_cast<int64_t>(seq.page_table.size()))
    fail(VEGAS_ERR_INTERNAL, "sequence " + std::to_string(seq.id) + ": " + std::to_string(rows) +
                                 " rows past position " + std::to_string(seq.kv_len) +
                                 " were not reserved");
  seq.kv_len += rows;
}

void SequenceKv::settle(Sequence &seq, int32_t kv_len) {
  seq.kv_len = kv_len;
  pool_.truncate(seq.page_table, int64_t{kv_len} + 1);
}

void SequenceKv::publish(Sequence &seq) {
  pool_.publish(seq.page_table, seq.tokens.data(), seq.kv_len, &seq.published);
}

void SequenceKv::release(Sequence &seq) {
  pool_.release(seq.page_table);
  seq.kv_len = 0;
}

}  // namespace vegas
