// CUDA return-code checks of the CUDA backend's host code (operators, launchers, kernels' host
// side, tests and benchmarks may use them too): every failure becomes a tbe::DeviceError naming the
// step and the CUDA error. Header-only, plain C++ (no device code).
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "tbe/errors.h"

namespace tbe::cuda {

/// Throws DeviceError("CUDA error in <what>: <cudaGetErrorName> (<cudaGetErrorString>)") if
/// `e` != cudaSuccess; returns otherwise. `what` names the step (a launch, a copy, a query).
inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw DeviceError(std::string("CUDA error in ") + what + ": " + cudaGetErrorName(e) + " (" +
                      cudaGetErrorString(e) + ")");
}

/// Right after a kernel launch (<<<...>>>): throws DeviceError naming `what` (the kernel) if the
/// launch failed (bad configuration, no kernel image for the device). Clears the error, as
/// cudaGetLastError does; does not synchronize, so errors while the kernel runs surface later
/// (at the stream synchronization of finish()).
inline void check_launch(const char* what) { cuda_check(cudaGetLastError(), what); }

}  // namespace tbe::cuda
