// The host side of the IKBO operators' device map check (LceOp::finish, AttentionOp::finish):
// launch_lce_map_check (kernels/ikbo_lce_launch.h) wrote the first bad candidate position into
// the workspace's map flag during run(); finish() turns it into the reference's error.
#pragma once

#include <cstdint>

namespace tbe::cuda::detail {

/// Reads the map flag `d_map_error` (device, one unsigned long long; the stream has been
/// synchronised). kLceMapOk: returns. Else downloads the map `d_cand_to_user` [B] int32 and
/// throws InvalidArgument with tbe::ikbo::validate_map's status on it (the reference's message,
/// naming cand_to_user[b] of the first offender), or, if the map validates now, one naming the
/// flagged position ("the map changed since"). `op` names the operator in CUDA errors.
void throw_if_map_error(const unsigned long long* d_map_error, const std::int32_t* d_cand_to_user,
                        std::int64_t B, std::int64_t U, const char* op);

}  // namespace tbe::cuda::detail
