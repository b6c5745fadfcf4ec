// The CUDA backend on host tensors (uploads, runs the device operators, downloads on success).
#pragma once

#include <cstddef>
#include <memory>

#include "tbe/backend.h"

namespace tbe::cuda {

/// Number of visible CUDA devices (0 when none or the driver is missing; never throws).
int device_count();
/// Free memory of device 0 in bytes (cudaMemGetInfo); 0 when no device is visible.
std::size_t device_free_bytes();

/// The CUDA implementation of tbe::Backend on device 0. Throws DeviceError if no device.
/// Every call uploads the host tensors and hands the operators poisoned device buffers
/// (DeviceBuffer::poisoned: every byte 0xFF) as workspace, output, per-sample-weight gradient and
/// saved-counts storage, so a kernel that counts on zeroed memory it did not zero fails every call
/// (docs/mutation.md: bwd_atomic_accumulator_not_zeroed).
std::unique_ptr<Backend> make_cuda_backend();

}  // namespace tbe::cuda
