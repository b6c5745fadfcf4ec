// The CUDA IKBO backend on host tensors (tbe::ikbo::IkboBackend): LCE through tbe::cuda::LceOp and
// cross attention through tbe::cuda::AttentionOp (upload, run, download on success).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tbe/cuda/ikbo_attention.h"
#include "tbe/cuda/ikbo_lce.h"
#include "tbe/ikbo.h"

namespace tbe::cuda {

/// Where the CUDA IKBO backend checks the candidate-to-user map.
enum class MapCheck : std::uint8_t {
  /// tbe::ikbo::validate_map on the host map before anything is uploaded (the reference's order).
  Host,
  /// Only the operators' device pass (launch_lce_map_check during run(), reported by finish()):
  /// how a caller whose map already lives on the device is served. A bad map still raises the
  /// reference's InvalidArgument and nothing is downloaded; the problem and the CUDA limits are
  /// still checked on the host first.
  Device,
};
std::string to_string(MapCheck m);  ///< "host", "device"

/// The CUDA IKBO backend's configuration (make_cuda_ikbo_backend).
struct CudaIkboOptions {
  LceStage stage = LceStage::PaddedK;  ///< the LCE stage lce() runs
  LceTuning lce = {};                  ///< L2Chunked knobs (chunk_candidates: 0 = by L2 size)
  /// AttentionOp's knobs (AttentionTuning): which kernel runs (wgmma or mma.sync), the mma.sync
  /// key block, Q placement and K/V stages, the wgmma schedule, the device grouping of the
  /// candidates and the epilogue.
  AttentionTuning attention = {};
  MapCheck map_check = MapCheck::Host;  ///< where a bad cand_to_user is caught
};

/// name(): "cuda:<device name> (lce: <stage>[, <k> candidates per chunk]; attention: <kernel>
/// [; map check on device])", <kernel> "wgmma" or "mma-sync" (attention.kernel, Auto resolved for
/// the device). lce() and attention() validate the problem, the map (MapCheck::Host)
/// and the CUDA limits on the host first (InvalidArgument, the reference's messages, or the ops'
/// limits, e.g. "attention.Dh: 96 is not supported ...": nothing is uploaded or written), then run
/// LceOp / AttentionOp with the options on device 0 on poisoned workspaces and outputs
/// (DeviceBuffer::poisoned); last_paths() is the op's paths() of the last successful call.
/// Throws DeviceError if no device is visible, InvalidArgument for invalid tuning values.
std::unique_ptr<ikbo::IkboBackend> make_cuda_ikbo_backend(const CudaIkboOptions& options = {});

}  // namespace tbe::cuda
