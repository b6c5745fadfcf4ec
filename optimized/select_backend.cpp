// select_backend(): Auto picks CUDA when this build has it and a device is visible.
#include "tbe/backend.h"

#include "tbe/errors.h"

#ifdef TBE_HAVE_CUDA
#include "tbe/cuda/backend.h"
#endif

namespace tbe {

bool cuda_available() {
#ifdef TBE_HAVE_CUDA
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

std::unique_ptr<Backend> select_backend(BackendKind kind) {
  switch (kind) {
    case BackendKind::Cpu:
      return make_reference_backend();
    case BackendKind::Cuda:
#ifdef TBE_HAVE_CUDA
      if (cuda::device_count() > 0) return cuda::make_cuda_backend();
      throw DeviceError("backend cuda: no CUDA device is visible");
#else
      throw DeviceError("backend cuda: this build has no CUDA backend (configured with TBE_CUDA=OFF "
                        "or no nvcc found)");
#endif
    case BackendKind::Auto:
    default:
      if (cuda_available()) return select_backend(BackendKind::Cuda);
      return make_reference_backend();
  }
}

}  // namespace tbe
