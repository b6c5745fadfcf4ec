// Decoding of the FATAL priority key (kernels/bounds_check.cu) into the BoundsViolation that
// tbe::find_first_violation reports; shared by ForwardOp and BackwardOp.
#pragma once

#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/launch.h"
#include "tbe/errors.h"
#include "tbe/problem.h"

namespace tbe::cuda::detail {

/// `key` != kFatalNone as left by launch_fatal_check. Reads the offending offsets (or locates the
/// bag of an offending index on the device, using `counters` as scratch) synchronously on `stream`.
/// feature_rows: [T] E of each feature's table.
BoundsViolation describe_fatal(unsigned long long key, DType index_dtype, const void* indices,
                               const void* offsets, std::int64_t num_bags, std::int64_t N,
                               const OutputLayout& layout,
                               const std::vector<std::int64_t>& feature_rows,
                               DeviceCounters* counters, cudaStream_t stream);

}  // namespace tbe::cuda::detail
