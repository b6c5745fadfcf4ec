// The operators' lifecycle (CUTLASS gemm/device/gemm.h): arguments -> can_implement() ->
// workspace size -> initialize (the constructor) -> run(). Each operator's static can_implement()
// returns the Status of every check its constructor makes (tbe::validate plus the CUDA limits);
// the constructors run it and throw InvalidArgument. A caller that already ran it (the host
// backends, before they upload anything) passes kValidated so that nothing is checked twice.
#pragma once

namespace tbe::cuda {

/// Tag (std::adopt_lock style) of the operator entry points that skip validation: the caller ran
/// the matching can_implement() (for run(): the matching validate()) on the same arguments and
/// got ok(). Passing it for arguments that were not checked is a precondition violation: the
/// kernels trust their inputs.
struct Validated {
  explicit Validated() = default;
};
inline constexpr Validated kValidated{};

}  // namespace tbe::cuda
