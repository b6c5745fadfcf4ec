// The enclosure oracle for the TBE forward (docs/semantics.md "Precision policies",
// docs/oracle.md). For every output element it computes an interval [lo, hi] that contains every
// result a conforming implementation may return under the problem's precision policy, whatever
// its summation order, blocking or atomics order, and judges an output against it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tbe/problem.h"

namespace tbe::oracle {

/// Interval of admissible stored values (both ends are values of the output type).
/// Finite or infinite ends: a value v is admissible iff lo <= v <= hi (NaN is not), with two
/// special forms (docs/oracle.md §5 "Special elements"):
///  - lo = -inf, hi = +inf: unconstrained (the accumulation type may overflow for this element);
///    every value, NaN included, is admissible;
///  - lo and hi NaN: the IEEE result is NaN (a NaN/Inf input, or +inf and -inf terms); only NaN
///    is admissible.
/// Signed zeros are not distinguished (-0.0 == +0.0).
struct Enclosure {
  double lo = 0.0;
  double hi = 0.0;
};

/// Coordinates of one forward output element. Pooled: (feature, sample, column) with column local
/// to the feature (VBE: sample is the rank-major bag index inside the feature, rank also given).
/// NONE: row = lookup position p, column d, feature of the bag holding p (-1 if none) and sample
/// = that bag's index inside its feature (-1 if none). Pooled non-VBE: row = sample (the output
/// row); pooled VBE: row = -1 (the output is 1-D).
struct ElementCoord {
  std::int64_t feature = -1;
  std::int64_t sample = -1;
  std::int64_t rank = -1;
  std::int64_t row = -1;
  std::int64_t column = -1;
  std::int64_t flat = -1;  ///< flat element index in the output buffer
  bool lookup_row = false; ///< (addition) true under NONE: `row` is a lookup position
  /// (addition, IKBO) Which operator's coordinates these are (docs/oracle.md "IKBO"):
  ///  - IkboLce: sample = candidate b, row = m, column = n;
  ///  - IkboAttention: row = query row b·n_seed + i, sample = candidate b, head = h, column = d.
  enum class Space : std::uint8_t { Tbe, IkboLce, IkboAttention } space = Space::Tbe;
  std::int64_t head = -1;  ///< (addition) attention head h (IkboAttention only)
  /// (addition, backward) true for a weight or momentum element: `feature` is a TABLE index and
  /// `row` a row of that table (column = d, or -1 for a momentum).
  bool table_row = false;
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

// ---- Additions (reusable pieces of the above; forward_enclosures/check_forward are built on
// ---- them). Compute the enclosures once and judge many candidate outputs against them.

/// Enclosures together with the FP64 reference values (the enclosures' centres before any
/// widening) and the output layout they index.
struct ForwardEnclosures {
  std::vector<Enclosure> enclosures;  ///< [layout.numel]
  std::vector<double> reference;      ///< [layout.numel] FP64 value in index order (NONE: W)
  OutputLayout layout;
};

/// forward_enclosures(p) plus the reference values and layout (same rules, same errors).
ForwardEnclosures compute_forward_enclosures(const ForwardProblem& p);

/// Which accumulation bound sizes the enclosures (docs/oracle.md §9).
struct EnclosureOptions {
  enum class Bound : std::uint8_t {
    /// Rigorous worst case γ(k)·Σ|terms|: never rejects a conforming implementation.
    WorstCase,
    /// Opt-in, sharper for long bags: Higham & Mary (2019) γ̃(k) = exp(λ√k·u + k·u²/(1−u)) − 1
    /// (never wider than γ(k)), with λ chosen so that, if the rounding errors of the kernel are
    /// independent mean-zero random variables, the probability that a conforming output is
    /// rejected is at most `false_alarm_probability` (union bound over every term of every
    /// element). Structured data (equal terms, sorted orders) can break that model: use it for
    /// random data only.
    Probabilistic,
  };
  Bound bound = Bound::WorstCase;
  double false_alarm_probability = 1e-9;  ///< per checked output, in (0, 1); Probabilistic only
};
/// compute_forward_enclosures with a chosen bound. `lambda_out` (optional) receives the λ used
/// (0 for WorstCase).
ForwardEnclosures compute_forward_enclosures(const ForwardProblem& p, const EnclosureOptions& o,
                                             double* lambda_out = nullptr);

/// Judges candidate values (FP64 copies of a stored output, [layout.numel]) against `enc`.
/// Besides lying in its enclosure, each value must be a value of p.options.policy.output (a
/// stored output is rounded once): a value that is not (e.g. 1 + 2^-13 for an FP16 output) is a
/// failure at position +-inf. Never throws on bad values; throws InvalidArgument on a size
/// mismatch.
CheckReport judge_forward(const ForwardProblem& p, const ForwardEnclosures& enc,
                          std::span<const double> values);

/// check_forward for candidate values already converted to FP64 (e.g. a CPU emulation or a
/// device output copied out): compute_forward_enclosures(p) then judge_forward.
CheckReport check_forward_values(const ForwardProblem& p, std::span<const double> values);

/// Admissibility of one value (the rule judge_forward applies, without the output-type test):
/// fills position and inside of a verdict whose enclosure and value are set.
void judge_element(ElementVerdict& v);

}  // namespace tbe::oracle
