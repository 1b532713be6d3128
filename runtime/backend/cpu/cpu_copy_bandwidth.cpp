// Host memcpy bandwidth: the CPU backend's decode floor (DESIGN §7).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend_model.h"
#include "common/error.h"

namespace vegas {

double CpuBackendModel::measure_copy_bandwidth() const {
  // 256 MiB: far past the last-level cache, so the copy streams from DRAM.
  const size_t bytes = size_t{256} << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::vector<double> rates;
  for (int i = 0; i < 5; ++i) {
    src[static_cast<size_t>(i)] = static_cast<char>(i + 2);  // fresh input each copy
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    // Reading the result keeps the copy from being optimised away.
    if (dst[static_cast<size_t>(i)] != static_cast<char>(i + 2))
      fail(VEGAS_ERR_INTERNAL, "CPU copy bandwidth: the copy did not land");
    rates.push_back(2.0 * static_cast<double>(bytes) / dt.count());
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace vegas
