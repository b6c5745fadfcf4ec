// The FP64 reference TBE forward (docs/semantics.md "Pooling"), also the CPU fallback backend.
// Deterministic: each bag is summed in index order in FP64, OpenMP over bags; the result is
// rounded once to the output type.
#pragma once

#include <cstdint>
#include <vector>

#include "tbe/bounds_check.h"
#include "tbe/problem.h"

namespace tbe {

/// What a forward call reports besides its output.
struct ForwardStats {
  std::int64_t warnings = 0;  ///< bounds-check warning count of this call (reset every call)
  /// Kernel paths exercised (optimized backend), e.g. "pooled.warp_per_bag.vec4",
  /// "bounds.fused", "bounds.separate". The reference reports {"reference"}.
  std::vector<std::string> paths;
};

/// Reference forward, FP64 result before output rounding.
/// Applies the bounds check of p.options (FATAL throws BoundsCheckError, nothing computed).
/// Returns make_output_layout(p).numel values (layout per OutputLayout), each exact-input FP64 sum
/// Σ s_p·W[i_p] (times 1/L for MEAN; empty bag -> +0.0) accumulated in index order.
/// Throws InvalidArgument (validate) or BoundsCheckError.
std::vector<double> forward_reference_fp64(const ForwardProblem& p, ForwardStats* stats = nullptr);

/// Reference forward into a host buffer `output` of make_output_layout(p).numel elements of type
/// p.options.policy.output: forward_reference_fp64 rounded once (RNE). On error nothing is written.
ForwardStats forward_reference(const ForwardProblem& p, void* output);

}  // namespace tbe
