#include "backend/graph_shapes.h"

namespace vegas {

namespace {

int64_t round_up(int64_t n, int64_t step) {
  return (n + step - 1) / step * step;
}

}  // namespace

bool graph_verifies(const SeqRows &s, bool capture) {
  using L = SeqRows::Logits;
  return s.tree == nullptr && s.sparse == nullptr && s.quest == nullptr &&
         s.device_sparse_key < 0 && (capture || s.capture == nullptr || s.capture->n_rows == 0) &&
         s.n_tokens >= 1 && s.n_tokens <= kGraphVerifyMaxRows &&
         (s.logits == L::kAll || (s.n_tokens == 1 && s.logits == L::kLast));
}

int32_t graph_verify_rows(int64_t rows, int32_t max_rows) {
  const int64_t padded = round_up(rows, kGraphVerifyRowStep);
  return padded <= max_rows ? static_cast<int32_t>(padded) : 0;
}

int32_t graph_capture_stride(int32_t stride) {
  return static_cast<int32_t>(round_up(stride, kGraphCaptureStrideStep));
}

int32_t graph_bucket(int32_t n) {
  int32_t b = 1;
  while (b < n && b < (1 << 30)) b *= 2;
  return b;
}

}  // namespace vegas
