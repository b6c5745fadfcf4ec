// The forward-case generator API shared by tools, tests and benchmarks. Two ways to a ForwardCase:
//  - generate(WorkloadSpec) (tbe/workloads.h): seeded workloads with index/length distributions;
//  - build_case(ForwardCaseSpec) (here): a case described explicitly -- tables (E_t, D_t, storage
//    type, a fill), feature_table_map, the batch geometry (B, or VBE batch sizes), the lookups as
//    bags (index lists) or as raw indices + offsets, per-sample weights, options, offset faults.
// Generators that draw their own values (RapidCheck properties, fuzz harnesses, tbe-fuzz) draw
// into a ForwardCaseSpec and let build_case lay the case out, so every case is laid out one way
// (docs/semantics.md: feature-major offsets, VBE rank-major inside a feature).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tbe/host_case.h"

namespace tbe {

/// A fault on the offsets, applied after they are built from the bags: offsets[k] := value
/// (k = -1: the last offset), or N + value when relative_to_n (N = number of indices). A fault
/// naming a k past the last offset is skipped.
struct OffsetFault {
  std::int64_t k = -1;
  bool relative_to_n = false;
  std::int64_t value = 0;
};

/// Element values of the tables: called once per element, table-major (t, then row r, then
/// column d), after the tables are allocated; each value is stored rounded to the storage type
/// (ForwardCase::set_weight).
using TableFill = std::function<double(std::int64_t t, std::int64_t r, std::int64_t d)>;

/// An explicit description of one forward case.
struct ForwardCaseSpec {
  // --- tables ---
  DType weights = DType::F32;                   ///< storage type of every table
  std::vector<std::int64_t> rows;               ///< [num_tables] E_t
  std::vector<std::int32_t> dims;               ///< [num_tables] D_t
  TableFill fill;                               ///< element values; empty: zeros
  std::vector<std::int32_t> feature_table_map;  ///< [T]
  // --- batch geometry ---
  std::int64_t batch_size = 0;                ///< B (non-VBE): T·B bags
  std::int32_t vbe_ranks = 0;                 ///< R (VBE only)
  std::vector<std::int32_t> vbe_batch_sizes;  ///< [T·R] (VBE): Σ_{f,r} bags
  // --- lookups: bags, or raw indices + offsets ---
  DType index_dtype = DType::I64;
  std::vector<std::int64_t> leading;  ///< indices before offsets[0]: in no bag
  /// Row ids of each bag, feature-major (VBE: rank-major inside a feature), one per bag of the
  /// geometry; values are not checked (out-of-range ids are bounds-check inputs).
  std::vector<std::vector<std::int64_t>> bags;
  /// Raw lookups, used when `offsets` is not empty (then `bags` and `leading` must be): indices
  /// [N] and offsets as given, not checked (malformed offsets are bounds-check inputs).
  std::vector<std::int64_t> indices;
  std::vector<std::int64_t> offsets;
  std::vector<float> per_sample_weights;  ///< [N] (leading indices first), or empty: unweighted
  std::vector<OffsetFault> offset_faults;  ///< applied in order after the offsets are built
  /// Pooling, bounds-check mode, precision policy, as given (policy.weights should be `weights`).
  ForwardOptions options;
};

/// The ForwardCase `spec` describes. Throws InvalidArgument naming the field when the spec is
/// inconsistent: rows/dims lengths, bags vs. the geometry's bag count (T·B or Σ vbe_batch_sizes),
/// vbe_batch_sizes vs. T·R, per_sample_weights vs. N, bags or leading together with raw offsets.
/// The result is not validated as a problem (tbe::validate): callers build invalid arguments too.
ForwardCase build_case(const ForwardCaseSpec& spec);

/// Everything of build_case but the tables: sets c's feature_table_map, lookups, batch geometry,
/// index type and options from `spec` and leaves c's weights_dtype, weights, rows, dims and
/// table_offsets as they are (callers that share large tables between cases, e.g. tbe-fuzz).
/// spec.weights, rows, dims and fill are ignored. Same errors as build_case.
void build_lookups(const ForwardCaseSpec& spec, ForwardCase& c);

}  // namespace tbe
