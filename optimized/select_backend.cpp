// select_backend(): Auto picks CUDA when this build has it and a device is visible.
#include "tbe/backend.h"

#include "tbe/errors.h"

#ifdef TBE_HAVE_CUDA
#include "tbe/cuda/backend.h"
// The CUDA IKBO backend (LCE on the GPU) is wired automatically once optimized/ provides this
// header declaring std::unique_ptr<ikbo::IkboBackend> tbe::cuda::make_cuda_ikbo_backend() (callable
// with no argument).
#if __has_include("tbe/cuda/ikbo_backend.h")
#include "tbe/cuda/ikbo_backend.h"
#define TBE_HAVE_CUDA_IKBO 1
#endif
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

std::unique_ptr<ikbo::IkboBackend> select_ikbo_backend(BackendKind kind) {
  switch (kind) {
    case BackendKind::Cpu:
      return ikbo::make_reference_ikbo_backend();
    case BackendKind::Cuda:
#if defined(TBE_HAVE_CUDA_IKBO)
      if (cuda::device_count() > 0) return cuda::make_cuda_ikbo_backend();
      throw DeviceError("ikbo backend cuda: no CUDA device is visible");
#elif defined(TBE_HAVE_CUDA)
      throw DeviceError("ikbo backend cuda: this build has no CUDA IKBO backend "
                        "(optimized/include/tbe/cuda/ikbo_backend.h is missing)");
#else
      throw DeviceError("ikbo backend cuda: this build has no CUDA backend (configured with "
                        "TBE_CUDA=OFF or no nvcc found)");
#endif
    case BackendKind::Auto:
    default:
      try {
        return select_ikbo_backend(BackendKind::Cuda);
      } catch (const DeviceError&) {
        return ikbo::make_reference_ikbo_backend();
      }
  }
}

}  // namespace tbe
