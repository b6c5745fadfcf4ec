// Backend selection (select_backend.h): Auto picks CUDA when this build has it and a device is
// visible. TBE_HAVE_CUDA is defined for this file only when tbe_optimized is built and linked.
#include "tbe/select_backend.h"

#include "tbe/errors.h"

#ifdef TBE_HAVE_CUDA
#include "tbe/cuda/backend.h"
#include "tbe/cuda/ikbo_backend.h"
#endif

namespace tbe {

bool cuda_available() {
#ifdef TBE_HAVE_CUDA
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

std::size_t cuda_free_bytes() {
#ifdef TBE_HAVE_CUDA
  return cuda::device_free_bytes();
#else
  return 0;
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

std::vector<std::unique_ptr<ikbo::IkboBackend>> select_ikbo_backends(BackendKind kind) {
  std::vector<std::unique_ptr<ikbo::IkboBackend>> out;
  if (kind == BackendKind::Auto) {
    try {
      return select_ikbo_backends(BackendKind::Cuda);
    } catch (const DeviceError&) {
      kind = BackendKind::Cpu;
    }
  }
  if (kind == BackendKind::Cpu) {
    out.push_back(ikbo::make_reference_ikbo_backend());
    return out;
  }
#ifdef TBE_HAVE_CUDA
  if (cuda::device_count() <= 0) throw DeviceError("ikbo backend cuda: no CUDA device is visible");
  for (cuda::LceStage s : cuda::kLceStages) {
    cuda::CudaIkboOptions o;
    o.stage = s;
    out.push_back(cuda::make_cuda_ikbo_backend(o));
  }
  cuda::CudaIkboOptions chunked;
  chunked.stage = cuda::LceStage::L2Chunked;
  chunked.lce.chunk_candidates = kVerifyChunkCandidates;
  chunked.map_check = cuda::MapCheck::Device;
  // the attention rows run on the first backend (AttentionKernel::Auto: wgmma on an H100 / H200;
  // the one-CTA grouping at the main job's B) and on this one: the FA2-style fallback after the
  // device-wide grouping, so a main job exercises both attention kernels and both groupings
  chunked.attention.kernel = cuda::AttentionKernel::MmaSync;
  chunked.attention.grouping = cuda::AttentionGroupingBuild::DeviceWide;
  out.push_back(cuda::make_cuda_ikbo_backend(chunked));
  return out;
#else
  out.push_back(select_ikbo_backend(BackendKind::Cuda));  // throws: no CUDA in this build
  return out;
#endif
}

std::unique_ptr<ikbo::IkboBackend> select_ikbo_backend(BackendKind kind) {
  switch (kind) {
    case BackendKind::Cpu:
      return ikbo::make_reference_ikbo_backend();
    case BackendKind::Cuda:
#ifdef TBE_HAVE_CUDA
      if (cuda::device_count() > 0) return cuda::make_cuda_ikbo_backend();
      throw DeviceError("ikbo backend cuda: no CUDA device is visible");
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
