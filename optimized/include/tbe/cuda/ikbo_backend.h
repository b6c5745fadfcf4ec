// The CUDA IKBO backend on host tensors (tbe::ikbo::IkboBackend): LCE through tbe::cuda::LceOp and
// cross attention through tbe::cuda::AttentionOp (upload, run, download on success).
#pragma once

#include <memory>

#include "tbe/cuda/ikbo_attention.h"
#include "tbe/cuda/ikbo_lce.h"
#include "tbe/ikbo.h"

namespace tbe::cuda {

/// name(): "cuda:<device name> (lce: <stage>; attention: mma-sync)". lce() and attention()
/// validate the problem, the map and the CUDA limits on the host first (InvalidArgument, the
/// reference's messages, or AttentionOp's limits, e.g. "attention.Dh: 96 is not supported ...":
/// nothing is uploaded or written), then run LceOp with `stage` / AttentionOp with `attention`
/// on device 0; last_paths() is the op's paths() of the last successful call. Throws DeviceError
/// if no device is visible.
std::unique_ptr<ikbo::IkboBackend> make_cuda_ikbo_backend(
    LceStage stage = LceStage::PaddedK, const AttentionTuning& attention = {});

}  // namespace tbe::cuda
