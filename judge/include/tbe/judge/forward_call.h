// One forward call on a backend under judgement: the call with every error caught and classified
// (BoundsCheckError with its offender, InvalidArgument with the argument it names, DeviceError,
// anything else), the recorded block a case folder keeps of it (docs/case-files.md "recorded"),
// and the comparison of a backend's bounds repair with tbe::repair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tbe/backend.h"
#include "tbe/bounds_check.h"
#include "tbe/errors.h"
#include "tbe/io/case_file.h"

namespace tbe::judge {

/// What one Backend::forward call did.
struct ForwardCall {
  enum class Outcome : std::uint8_t {
    Output,
    BoundsError,
    InvalidArgument,
    DeviceError,
    OtherError
  };
  Outcome outcome = Outcome::Output;
  ForwardStats stats;         ///< Output: the call's stats
  BoundsViolation violation;  ///< BoundsError: the offender the backend named
  std::string argument;       ///< InvalidArgument: the argument it named
  std::string what;           ///< any error: its what()

  bool ok() const { return outcome == Outcome::Output; }
  /// "BoundsCheckError(<offender>)", "InvalidArgument[<argument>]: <what>", "DeviceError: <what>"
  /// or "unexpected error: <what>"; "" for an output.
  std::string error_text() const;
  /// The error as a case folder records it: "bounds_check", "invalid_argument" or "device_error"
  /// (DeviceError and any other error); "" for an output.
  std::string error_name() const;
};

/// Runs dev.forward(p, output, strategy) and catches every std::exception into the result.
/// `output`: a host buffer of make_output_layout(p).numel elements of p.options.policy.output (a
/// PoisonedOutput, so the caller can check the canary and untouched-on-error afterwards).
ForwardCall call_forward(Backend& dev, const ForwardProblem& p, const ForwardStrategy& strategy,
                         void* output);

/// The `recorded` block of a case folder for `call`: its output bytes (`output`: [numel] elements
/// of `output_dtype`, as the call wrote them) and warning count when it returned, else its
/// error_name().
io::RecordedOutputs recorded_outputs(const ForwardCall& call, std::vector<std::byte> output,
                                     DType output_dtype, const std::string& implementation);

/// True if `got` (a backend's Backend::repair) equals `expected` (tbe::repair): counts, repaired
/// offsets and indices. Otherwise `why` lists each difference ("warnings 3 vs 2; offsets differ
/// first at 5; ...").
bool same_repair(const RepairResult& expected, const RepairResult& got, std::string* why);

}  // namespace tbe::judge
