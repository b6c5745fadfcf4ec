// Judging one forward call of a backend against the reference and the oracle, as one verdict with
// the first failed check: InvalidArgument agreement with tbe::validate (the argument named, the
// output untouched), the backend's repair against tbe::repair (warning/ignore), the FATAL first
// offender against tbe::find_first_violation (output untouched), the canary tail, the warning
// count, and the output against the enclosure oracle (oracle::check_forward). The call runs on a
// PoisonedOutput. Used by tbe-fuzz on every generated case and by its shrinker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tbe/backend.h"
#include "tbe/judge/forward_call.h"

namespace tbe::judge {

/// What the reference expects of a forward call on a valid problem `p` (docs/semantics.md):
/// under FATAL the first offender (tbe::find_first_violation; none for a well-formed input),
/// under WARNING / IGNORE the repair (tbe::repair) and its warning count, else no warnings.
struct ForwardExpectation {
  std::optional<BoundsViolation> violation;  ///< FATAL: BoundsCheckError expected
  std::optional<RepairResult> repair;        ///< WARNING / IGNORE: what repair must return
  std::int64_t warnings = 0;                 ///< ForwardStats::warnings expected
};
/// Throws what the reference throws (InvalidArgument for an invalid problem).
ForwardExpectation expect_forward(const ForwardProblem& p);

struct ForwardJudgement {
  bool failed = false;
  /// The first failed check: "invalid_argument", "invalid_argument.untouched", "repair", "fatal",
  /// "fatal.untouched", "error", "canary", "warnings", "oracle", "device" (a DeviceError: the
  /// context may be lost) or "reference" (the reference threw).
  std::string check;
  std::string detail;  ///< what was expected and what came back
  ForwardCall call;    ///< the backend's forward call
  /// The backend's output ([numel] elements of p.options.policy.output) when the call returned on
  /// a valid problem; empty otherwise.
  std::vector<std::byte> output;
  std::int64_t expected_warnings = 0;  ///< tbe::repair's count (warning/ignore), else 0
  bool device_lost = false;            ///< a DeviceError came back (from forward or repair)
  bool expected_invalid = false;       ///< tbe::validate rejects the problem
  bool expected_violation = false;     ///< FATAL with an offender (BoundsCheckError expected)
};

/// Elements of a generous buffer for the output (or grad_output) of a call whose problem `p` may
/// be invalid, so its layout is unknown: every feature at its table's D clamped to [1, 4096] per
/// offset, plus D_max per index, at most 2^22 elements. Reads only the sizes of `p`.
std::int64_t invalid_call_numel(const ForwardProblem& p);

/// Judges dev.forward(p, ·, strategy) (and dev.repair(p) under warning/ignore). `p` may be an
/// invalid argument: the backend must then throw the InvalidArgument tbe::validate names and write
/// nothing into a generous poisoned buffer. Never throws for a backend's misbehaviour: every
/// disagreement is a failed check.
ForwardJudgement judge_forward_call(Backend& dev, const ForwardProblem& p,
                                    const ForwardStrategy& strategy);

}  // namespace tbe::judge
