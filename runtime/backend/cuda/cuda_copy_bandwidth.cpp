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
  // 1 GiB per buffer: far past the 50 MB L2, so the copy streams HBM. The
  // copies alternate direction back to back, 3 warm-ups, median of 20: the
  // one measurement every floor of the project uses (vegas bench through
  // vegas_model_measure_bandwidth, bench_cuda_decode, bench_cuda_phases). A
  // cudaMemset of the destination before each copy, as this did before, read
  // 2.6 TB/s on the H100 where back-to-back copies read 3.0, and vegas bench
  // reported a step at 101.7% of its floor.
  const size_t bytes = size_t{1} << 30;
  DeviceBuffer a(bytes, "the copy-bandwidth source");
  DeviceBuffer b(bytes, "the copy-bandwidth destination");
  check(cudaMemset(a.get(), 1, bytes), "cudaMemset");
  check(cudaMemset(b.get(), 0, bytes), "cudaMemset");
  Event start, stop;
  std::vector<double> rates;
  for (int i = 0; i < 23; ++i) {
    void *dst = i % 2 ? a.get() : b.get();
    const void *src = i % 2 ? b.get() : a.get();
    check(cudaEventRecord(start.e, nullptr), "cudaEventRecord");
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nullptr), "cudaMemcpyAsync");
    check(cudaEventRecord(stop.e, nullptr), "cudaEventRecord");
    check(cudaEventSynchronize(stop.e), "cudaEventSynchronize");
    float ms = 0.f;
    check(cudaEventElapsedTime(&ms, start.e, stop.e), "cudaEventElapsedTime");
    if (i >= 3) rates.push_back(2.0 * static_cast<double>(bytes) / (ms * 1e-3));
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace vegas::cuda
