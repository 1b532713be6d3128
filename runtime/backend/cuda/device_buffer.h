// Owning device and pinned-host allocations (RAII, move-only).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace vegas::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, const char *what) { allocate(bytes, what); }
  DeviceBuffer(DeviceBuffer &&o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  DeviceBuffer &operator=(DeviceBuffer &&o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = o.bytes_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { release(); }

  void allocate(size_t bytes, const char *what) {
    release();
    if (bytes == 0) return;
    const cudaError_t e = cudaMalloc(&ptr_, bytes);
    if (e != cudaSuccess) {
      ptr_ = nullptr;
      (void)cudaGetLastError();  // clear the sticky-free allocation error
      fail(VEGAS_ERR_OUT_OF_MEMORY, std::string("CUDA: cannot allocate ") + std::to_string(bytes) +
                                        " bytes of device memory for " + what + ": " +
                                        cudaGetErrorString(e));
    }
    bytes_ = bytes;
  }
  template <typename T = void>
  T *get() const {
    return static_cast<T *>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void release() {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void *ptr_ = nullptr;
  size_t bytes_ = 0;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer &&o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  PinnedBuffer(const PinnedBuffer &) = delete;
  PinnedBuffer &operator=(const PinnedBuffer &) = delete;
  ~PinnedBuffer() { release(); }

  // Grows (never shrinks) to at least `bytes`, by half its size at least (a
  // score capture's rows grow with the context every round, and each
  // cudaMallocHost of megabytes took milliseconds); contents are not kept.
  void reserve(size_t bytes, const char *what) {
    if (bytes <= bytes_) return;
    const size_t grown = std::max(bytes, bytes_ + bytes_ / 2);
    release();
    cudaError_t e = cudaMallocHost(&ptr_, grown);
    size_t got = grown;
    if (e != cudaSuccess && grown > bytes) {  // the growth's margin is optional
      (void)cudaGetLastError();
      e = cudaMallocHost(&ptr_, bytes);
      got = bytes;
    }
    if (e != cudaSuccess) {
      ptr_ = nullptr;
      (void)cudaGetLastError();
      fail(VEGAS_ERR_OUT_OF_MEMORY, std::string("CUDA: cannot allocate ") + std::to_string(bytes) +
                                        " bytes of pinned memory for " + what);
    }
    bytes_ = got;
  }
  template <typename T = void>
  T *get() const {
    return static_cast<T *>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void release() {
    if (ptr_) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void *ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace vegas::cuda
