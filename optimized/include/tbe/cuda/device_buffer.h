// A small owning device allocation (cudaMalloc / cudaFree) for the backend, tests and benchmarks.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include "tbe/errors.h"

namespace tbe::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Uninitialized device memory of `bytes` (nothing allocated for 0). Throws DeviceError.
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) {
      const cudaError_t e = cudaMalloc(&ptr_, bytes);
      if (e != cudaSuccess)
        throw DeviceError("cudaMalloc(" + std::to_string(bytes) + " bytes): " +
                          cudaGetErrorString(e));
    }
  }
  /// Device copy of `bytes` of host memory.
  DeviceBuffer(const void* host, std::size_t bytes) : DeviceBuffer(bytes) {
    if (bytes > 0 && host != nullptr) {
      const cudaError_t e = cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice);
      if (e != cudaSuccess) throw DeviceError(std::string("upload: ") + cudaGetErrorString(e));
    }
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  void reset() {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* get() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace tbe::cuda
