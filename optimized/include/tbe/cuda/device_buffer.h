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
  /// `bytes` of device memory with every byte kPoisonByte: NaN in FP32, FP16 and BF16, -1 in
  /// signed and the maximum in unsigned integers. The host-tensor backends hand such buffers to the
  /// operators as workspaces and outputs, so a kernel that reads memory it never wrote (a counter
  /// or an accumulator it assumed zero, an output element it skipped) is wrong on every call
  /// instead of only when cudaMalloc happens to return non-zero memory. The fill is one
  /// cudaMemsetAsync on `stream`, the stream the operator will run on (nullptr: the legacy
  /// default stream), so the operator's kernels see it without a host wait. Throws DeviceError.
  static DeviceBuffer poisoned(std::size_t bytes, cudaStream_t stream) {
    DeviceBuffer b(bytes);
    if (bytes > 0) {
      const cudaError_t e = cudaMemsetAsync(b.ptr_, kPoisonByte, bytes, stream);
      if (e != cudaSuccess) throw DeviceError(std::string("poison: ") + cudaGetErrorString(e));
    }
    return b;
  }
  /// The byte poisoned() fills with (also the IKBO map flag's "no offender" value, kLceMapOk).
  static constexpr int kPoisonByte = 0xff;
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
