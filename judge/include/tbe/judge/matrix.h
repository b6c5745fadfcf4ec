// The verification matrix of tbe-verify: its axes, the cases, and the covering design that picks
// which cases run. An axis value is always written as `axis=value` with the names below, the same
// in the table, the JSON, --only filters and replay commands.
//
// Axes (8 named, 6 design factors: policy, w and out travel together as one "precision" factor):
//   policy   seed-default | fbgemm-cuda            precision policy family (precision.h)
//   w        fp32 | fp16 | bf16                    weight storage type
//   out      fp32 | fp16 | bf16                    output type (fp32 except two precision levels)
//   weighted 0 | 1                                 per-sample weights
//   index    int32 | int64                         index/offset width
//   pooling  sum | mean | none
//   bounds   none | warning | ignore | fatal       bounds-check mode
//   vbe      0 | 1                                 variable batch size per feature
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tbe/precision.h"
#include "tbe/types.h"

namespace tbe::judge {

/// One precision level of the matrix: a policy family, the weight storage and the output type.
struct PrecisionLevel {
  PolicyKind policy = PolicyKind::SeedDefault;
  DType weights = DType::F32;
  DType output = DType::F32;
  bool operator==(const PrecisionLevel&) const = default;
};

/// The precision levels, in matrix order: {seed-default, fbgemm-cuda} x {fp32, fp16, bf16} with
/// fp32 output, then seed-default fp16 -> fp16 output and fbgemm-cuda bf16 -> bf16 output.
const std::vector<PrecisionLevel>& precision_levels();

/// The axis values of one case.
struct CaseAxes {
  PrecisionLevel precision;
  bool weighted = false;
  DType index = DType::I64;
  PoolingMode pooling = PoolingMode::Sum;
  BoundsCheckMode bounds = BoundsCheckMode::None;
  bool vbe = false;
  bool operator==(const CaseAxes&) const = default;
};

/// Axis names in label order, and the allowed values of each.
const std::vector<std::string>& axis_names();
const std::vector<std::string>& axis_values(const std::string& axis);
/// The value of `axis` in case `c` (e.g. axis_value(c, "w") == "fp16").
std::string axis_value(const CaseAxes& c, const std::string& axis);

/// "policy=seed-default,w=fp16,out=fp32,weighted=1,index=int32,pooling=mean,bounds=warning,vbe=1":
/// the case's name in tables, JSON and --only.
std::string case_label(const CaseAxes& c);

/// False for combinations the operator rejects by definition (weighted with pooling NONE);
/// `why` receives the reason.
bool applicable(const CaseAxes& c, std::string* why = nullptr);

/// Which cases run.
enum class Design : std::uint8_t {
  Pairwise,  ///< greedy covering array: every applicable pair of factor values at least once
  Full,      ///< the full cross product
};
std::string to_string(Design d);
/// Throws std::invalid_argument naming the value and the allowed ones.
Design parse_design(const std::string& s);

/// The cases of a design, grouped by weight storage type (fp32, fp16, bf16: each group shares one
/// generated base workload), deterministic. Pairwise also carries one not-applicable case
/// (weighted=1 with pooling=none) so the skip is shown; Full carries all of them.
std::vector<CaseAxes> enumerate_cases(Design d);

/// Pair coverage of a set of cases over the 6 design factors (precision level, weighted, index,
/// pooling, bounds, vbe), counting applicable cases only. `required` counts the pairs of factor
/// values that some applicable case can hold; `covered` those held by at least one case in `cases`.
struct Coverage {
  std::int64_t required = 0;
  std::int64_t covered = 0;
  std::vector<std::string> missing;  ///< "pooling=none & bounds=fatal", ... (first few)
};
Coverage pair_coverage(const std::vector<CaseAxes>& cases);

/// A filter on axis values, from --only: "axis=value[|value...][,axis=value...]". An axis named
/// more than once accepts the union of its values; unnamed axes accept every value.
class CaseFilter {
 public:
  /// Throws std::invalid_argument naming the bad axis or value and what is allowed.
  static CaseFilter parse(const std::string& text);
  bool matches(const CaseAxes& c) const;
  bool empty() const { return allowed_.empty(); }
  /// True if every axis is named with exactly one value (the filter names one case).
  bool pins_one_case() const;
  std::string text() const { return text_; }

 private:
  std::map<std::string, std::set<std::string>> allowed_;
  std::string text_;
};

}  // namespace tbe::judge
