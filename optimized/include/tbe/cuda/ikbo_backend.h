// The CUDA IKBO backend on host tensors (tbe::ikbo::IkboBackend): LCE on the GPU through
// tbe::cuda::LceOp (upload, run, download on success); attention delegates to the CPU reference
// backend (no CUDA attention kernel yet) and name() says so.
#pragma once

#include <memory>

#include "tbe/cuda/ikbo_lce.h"
#include "tbe/ikbo.h"

namespace tbe::cuda {

/// name(): "cuda:<device name> (lce: <stage>; attention: cpu-reference)". lce() validates the
/// problem and the map on the host first (InvalidArgument, the reference's messages: nothing is
/// uploaded or written), then runs LceOp with `stage` on device 0. Throws DeviceError if no
/// device is visible.
std::unique_ptr<ikbo::IkboBackend> make_cuda_ikbo_backend(
    LceStage stage = LceStage::PaddedK);

}  // namespace tbe::cuda
