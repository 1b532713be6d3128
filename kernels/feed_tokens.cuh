// Device-fed decoding (a speculative round's draft chain): the ids one step
// drew become the next step's input tokens without a host round trip. A
// negative id (kernels::sample's error codes) is fed as 0, so the next step
// reads a valid embedding row; the host raises the error when it reads the ids.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace vegas::kernels {

// tokens[i] = ids[i], or with `from`, ids[from[i]] where from[i] >= 0 (a
// verify pass behind a draft chain: its draft rows take the chain's draws,
// each sequence's first row keeps its staged token).
struct FeedTokensParams {
  const int32_t *ids = nullptr;   // drawn ids (or error codes)
  const int32_t *from = nullptr;  // [n] or null: index into ids per token, -1 = keep
  int32_t *tokens = nullptr;      // [n] the next step's staged input tokens
  int32_t n = 0;
};

cudaError_t feed_tokens(const FeedTokensParams &p, cudaStream_t stream);

}  // namespace vegas::kernels
