// Device-to-device copy bandwidth: the CUDA backend's decode floor (DESIGN §7),
// timed with events on the model's device.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_backend_model.h"
#include "backend/cuda/cuda_event.h"
#include "backend/cuda/device_buffer.h"

namespace vegas::cuda {

double CudaBackendModel::measure_copy_bandwidth() const {
  activate();
  // 1 GiB per buffer: far past the 50 MB L2, so the copy streams HBM.
  const size_t bytes = size_t{1} << 30;
  DeviceBuffer src(bytes, "the copy-bandwidth source");
  DeviceBuffer dst(bytes, "the copy-bandwidth destination");
  check(cudaMemset(src.get(), 1, bytes), "cudaMemset");
  Event start, stop;
  std::vector<double> rates;
  for (int i = 0; i < 8; ++i) {
    check(cudaMemset(dst.get(), 0, bytes), "cudaMemset");  // no stale result in L2
    check(cudaEventRecord(start.e, nullptr), "cudaEventRecord");
    check(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, nullptr),
          "cudaMemcpyAsync");
    check(cudaEventRecord(stop.e, nullptr), "cudaEventRecord");
    check(cudaEventSynchronize(stop.e), "cudaEventSynchronize");
    float ms = 0.f;
    check(cudaEventElapsedTime(&ms, start.e, stop.e), "cudaEventElapsedTime");
    if (i > 0) rates.push_back(2.0 * static_cast<double>(bytes) / (ms * 1e-3));  // i = 0 warms up
  }
  std::sort(rates.begin(), rates.end());
  return 0.5 * (rates[rates.size() / 2 - 1] + rates[rates.size() / 2]);
}

}  // namespace vegas::cuda
