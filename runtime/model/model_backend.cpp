// Chooses the compute backend of a model at load time.
#include "common/error.h"
#include "model/model.h"

#if defined(VEGAS_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#endif

namespace vegas {

std::unique_ptr<BackendModel> make_backend(const ModelConfig &config, const ModelWeights &weights,
                                           const ModelLoadOptions &options) {
  if (options.make_backend) return options.make_backend(config, weights);
  bool use_cuda = !options.backend_auto && options.backend == BackendKind::kCuda;
#if defined(VEGAS_HAVE_CUDA)
  if (options.backend_auto) use_cuda = cuda_device_count() > 0;
  if (use_cuda) {
    CudaBackendOptions cuda;
    cuda.device_index = options.device_index;
    return create_cuda_backend(config, weights, cuda);
  }
#else
  if (use_cuda)
    fail(VEGAS_ERR_NOT_BUILT,
         "this libvegas was built without CUDA (configure with -DVEGAS_CUDA=ON)");
#endif
  CpuBackendOptions cpu;
  cpu.n_threads = options.n_threads;
  if (options.progress) {
    // The backend reports [0, 1] of its own work, which is the last 80% of loading.
    auto outer = options.progress;
    cpu.progress = [outer](float p) { return outer(0.2f + 0.8f * p); };
  }
  return create_cpu_backend(config, weights, cpu);
}

std::unique_ptr<BackendModel> make_synthetic_backend(const ModelConfig &config, uint64_t seed,
                                                     const ModelLoadOptions &options) {
#if defined(VEGAS_HAVE_CUDA)
  const bool use_cuda =
      options.backend_auto ? cuda_device_count() > 0 : options.backend == BackendKind::kCuda;
  if (!use_cuda)
    fail(VEGAS_ERR_UNSUPPORTED,
         "synthetic models need the CUDA backend (no CUDA device, or the CPU backend was asked "
         "for)");
  CudaBackendOptions cuda;
  cuda.device_index = options.device_index;
  return create_cuda_backend_synthetic(config, seed, cuda);
#else
  (void)config;
  (void)seed;
  (void)options;
  fail(VEGAS_ERR_NOT_BUILT,
       "synthetic models need CUDA and this libvegas was built without it (-DVEGAS_CUDA=ON)");
#endif
}

}  // namespace vegas
