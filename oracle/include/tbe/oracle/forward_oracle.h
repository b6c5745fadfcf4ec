// The enclosure oracle for the TBE forward (../shared/spec/precision-and-oracle.md,
// docs/oracle.md). For every output element it computes an interval [lo, hi] that contains every
// result a conforming implementation may return under the problem's precision policy, whatever
// its summation order, blocking or atomics order, and judges an output against it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tbe/problem.h"

namespace tbe::oracle {

/// Interval of admissible stored values (both ends are values of the output type).
struct Enclosure {
  double lo = 0.0;
  double hi = 0.0;
};

/// Coordinates of one forward output element. Pooled: (feature, sample, column) with column local
/// to the feature (VBE: sample is the rank-major bag index inside the feature, rank also given).
/// NONE: row = lookup position p, column d, feature of the bag holding p (-1 if none).
struct ElementCoord {
  std::int64_t feature = -1;
  std::int64_t sample = -1;
  std::int64_t rank = -1;
  std::int64_t row = -1;
  std::int64_t column = -1;
  std::int64_t flat = -1;  ///< flat element index in the output buffer
};

/// The judgement of one output element.
struct ElementVerdict {
  ElementCoord where;
  Enclosure enclosure;
  double value = 0.0;     ///< the candidate's stored value (FP64)
  double reference = 0.0; ///< the FP64 reference value before output rounding
  /// (value - mid) / radius: |position| <= 1 inside; +-inf if the interval is a point and the value
  /// differs; NaN value -> +inf. mid = (lo + hi) / 2, radius = (hi - lo) / 2.
  double position = 0.0;
  bool inside = true;
};

/// The result of checking one output tensor.
struct CheckReport {
  std::string check;               ///< e.g. "forward"
  std::string policy;              ///< to_string(policy)
  std::int64_t elements = 0;
  std::int64_t failures = 0;       ///< elements outside their enclosure
  ElementVerdict worst;            ///< largest |position| (first such by flat index)
  bool passed() const { return failures == 0; }
  /// One line: "forward [policy]: 0/1048576 outside; worst (feature 3, sample 17, column 5)
  ///  value 1.25 in [1.2499, 1.2501] at +0.43 radius".
  std::string summary() const;
};

/// Per-element enclosures of the forward of `p` (after p's bounds check repair; FATAL inputs that
/// violate bounds throw BoundsCheckError, as the operator does). Size make_output_layout(p).numel.
/// Each enclosure bounds: the reference's own FP64 error, the accumulation error of any order in
/// the policy's accumulation type (γ(n-1+3)·Σ|terms| plus underflow), MEAN's scaling, then one RNE
/// rounding to the output type (applied to both ends: rounding is monotone).
std::vector<Enclosure> forward_enclosures(const ForwardProblem& p);

/// Judges `output` (host buffer, make_output_layout(p).numel elements of p.options.policy.output)
/// against forward_enclosures(p). Never throws on a bad value: NaN/Inf are failures.
CheckReport check_forward(const ForwardProblem& p, const void* output);

/// Coordinates of flat output element `flat` of problem p.
ElementCoord locate_output_element(const ForwardProblem& p, const OutputLayout& layout,
                                   std::int64_t flat);

}  // namespace tbe::oracle
