// CUDA return-code checks for the host side: every failure becomes tbe::DeviceError naming the
// step and the CUDA error string.
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "tbe/errors.h"

namespace tbe::cuda::detail {

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw DeviceError(std::string("CUDA error in ") + what + ": " + cudaGetErrorName(e) + " (" +
                      cudaGetErrorString(e) + ")");
}
/// After a kernel launch: the launch error (configuration, missing image) if any.
inline void check_launch(const char* what) { cuda_check(cudaGetLastError(), what); }

}  // namespace tbe::cuda::detail
