// Host side of the small-table histogram path (docs/small-table.md): per-feature eligibility
// with its reasons, the saved-counts layout, the device feature list. Used by ForwardOp and
// BackwardOp (src/forward_op.cpp, src/backward_op.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/small_table_launch.h"
#include "tbe/cuda/small_table.h"
#include "tbe/problem.h"

namespace tbe::cuda::detail {

/// The decision for every feature of p (validated): structural conditions first (pooling SUM or
/// MEAN, not VBE, unweighted, FP16 weights, FP32 accumulation, a table no other feature uses,
/// E <= 64, 64 <= D <= 128), then,
/// under Mode::Auto, the expected L (tuning.expected_bag_length, or measured from the device
/// offsets: one synchronous copy of T + 1 values). Mode::Off: every feature ineligible ("off").
std::vector<SmallTableFeature> small_table_eligibility(const ForwardProblem& p,
                                                       const SmallTableTuning& tuning);

/// The eligible features' device metadata, in feature order (row_offset: linearized row 0 of the
/// feature's table, as the backward linearizes).
std::vector<SmallFeatureMeta> small_table_meta(const ForwardProblem& p,
                                               const std::vector<SmallTableFeature>& decision);

/// B rounded up to 16 (the bags of one k-tile of the backward GEMM).
std::int64_t small_table_padded_bags(std::int64_t batch_size);
/// Bytes of a counts buffer for `num_small` features and B bags, and its view at `base`.
std::size_t small_table_counts_bytes(std::int64_t num_small, std::int64_t batch_size);
CountsView small_table_counts_view(void* base, std::int64_t num_small, std::int64_t batch_size);

}  // namespace tbe::cuda::detail
