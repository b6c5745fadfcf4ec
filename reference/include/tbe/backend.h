// The operator interface that the reference (CPU fallback) and CUDA both implement, on host
// tensors. Choosing one (select_backend: CUDA when a device is present) is the layer above both:
// backends/include/tbe/select_backend.h (library tbe_backends).
#pragma once

#include <memory>
#include <string>

#include "tbe/backward.h"
#include "tbe/forward.h"
#include "tbe/problem.h"

namespace tbe {

/// Options that choose among equivalent kernel strategies (semantics unchanged).
struct ForwardStrategy {
  /// Bounds check fused into the gather (true) or run as a separate check/repair pass (false).
  bool fused_bounds_check = true;
};

/// What one Backend::training_step did: the forward's stats and the backward's.
struct TrainingStepStats {
  ForwardStats forward;
  BackwardStats backward;
};

/// A TBE backend. All pointers in the problem are host pointers; `output` is a host buffer of
/// make_output_layout(p).numel elements of p.options.policy.output.
/// Both backends run validate() first and throw the same InvalidArgument / BoundsCheckError for
/// the same input; on any error `output` is left untouched.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  ///< "cpu-reference" or "cuda:<device name>"
  virtual ForwardStats forward(const ForwardProblem& p, void* output,
                               const ForwardStrategy& strategy = {}) = 0;
  /// Bounds check/repair as its own step (same result on both backends).
  virtual RepairResult repair(const ForwardProblem& p) = 0;
  /// Backward fused with the exact optimizer (tbe/backward.h). Host pointers in `p` and `out`;
  /// both backends run validate(p, s) and validate(p, out) first and throw the same errors; on any
  /// error nothing in `out` is written.
  virtual BackwardStats backward(const BackwardProblem& p, const BackwardOutputs& out,
                                 const BackwardStrategy& s = {}) = 0;
  /// One training step of a batch: forward(p.forward, output) then backward(p, out, s) on the
  /// same lookups, with the results of those two calls (`output` as forward(), `out` as
  /// backward(); errors as theirs, the forward's before anything of the backward runs). A backend
  /// may carry state of the forward into the backward: the CUDA backend's small-table path reuses
  /// the forward's histogram counts (docs/small-table.md "Saved counts"). Default: the two calls.
  virtual TrainingStepStats training_step(const BackwardProblem& p, void* output,
                                          const BackwardOutputs& out,
                                          const BackwardStrategy& s = {});
};

/// The CPU reference backend (OpenMP).
std::unique_ptr<Backend> make_reference_backend();

}  // namespace tbe
