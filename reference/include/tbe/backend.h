// The operator interface that the reference (CPU fallback) and CUDA both implement, on host
// tensors. select_backend(Auto) picks CUDA when a device is present (optimized/select_backend.cpp).
#pragma once

#include <memory>
#include <string>

#include "tbe/forward.h"
#include "tbe/ikbo.h"
#include "tbe/problem.h"

namespace tbe {

enum class BackendKind : std::uint8_t { Auto, Cpu, Cuda };

/// Options that choose among equivalent kernel strategies (semantics unchanged).
struct ForwardStrategy {
  /// Bounds check fused into the gather (true) or run as a separate check/repair pass (false).
  bool fused_bounds_check = true;
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
};

/// The CPU reference backend (OpenMP).
std::unique_ptr<Backend> make_reference_backend();

/// Auto: CUDA if built with CUDA and a device is visible, else CPU. Cuda when unavailable throws
/// DeviceError saying why. Defined in optimized/ (target tbe_backends).
std::unique_ptr<Backend> select_backend(BackendKind kind = BackendKind::Auto);
/// (added) The IKBO backend (ikbo.h). Cpu: ikbo::make_reference_ikbo_backend(). Cuda:
/// tbe::cuda::make_cuda_ikbo_backend() when this build has CUDA, the header tbe/cuda/ikbo_backend.h
/// that declares it, and a visible device; otherwise throws DeviceError saying which is missing.
/// Auto: Cuda when that works, else Cpu. Defined in optimized/select_backend.cpp.
std::unique_ptr<ikbo::IkboBackend> select_ikbo_backend(BackendKind kind = BackendKind::Auto);
/// True if this build has CUDA and a device is visible.
bool cuda_available();

}  // namespace tbe
