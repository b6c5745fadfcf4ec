// The CUDA backend on host tensors (uploads, runs the device operators, downloads on success).
#pragma once

#include <memory>

#include "tbe/backend.h"

namespace tbe::cuda {

/// Number of visible CUDA devices (0 when none or the driver is missing; never throws).
int device_count();

/// The CUDA implementation of tbe::Backend on device 0. Throws DeviceError if no device.
std::unique_ptr<Backend> make_cuda_backend();

}  // namespace tbe::cuda
