// Speculative acceptance on the device (kernels/speculative_accept.cuh) for
// CudaContext: it owns the specs it uploads and the records it downloads, and
// reads the draft chain's and the verify pass's candidates where they lie.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/device_buffer.h"
#include "speculative_accept.cuh"

namespace vegas::cuda {

class DeviceAcceptance {
 public:
  // The draft chain's draws [steps][rows] followed by each pass's candidates.
  struct Chain {
    const int32_t *draws = nullptr;
    int32_t steps = 0;
    int32_t rows = 0;
  };
  // The verify pass's candidates, [count: rows][ids: rows x cap][values: rows x cap].
  struct Candidates {
    const int32_t *block = nullptr;
    int32_t rows = 0;
  };

  // Enqueues the acceptance of `specs` and the download of its records on
  // `stream` (which must not be synchronised for end() to be valid yet).
  void begin(cudaStream_t stream, const std::vector<kernels::AcceptSeq> &specs, const Chain &chain,
             const Candidates &verify);
  bool pending() const { return pending_ > 0; }
  // Once the stream has passed begin()'s download: one result per spec.
  void end(std::vector<BackendContext::AcceptedOnDevice> *out);
  // Drops a begun acceptance whose results will not be read.
  void abandon() { pending_ = 0; }

 private:
  DeviceBuffer specs_, records_;
  PinnedBuffer specs_host_, records_host_;
  int32_t pending_ = 0;  // specs of the acceptance begun, 0 when none
};

}  // namespace vegas::cuda
