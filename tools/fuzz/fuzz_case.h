// The case representation of tbe-fuzz: tables, bags as lists of lookups, offset faults and an
// optional invalid argument, and its expansion into a forward call (ForwardCase + ForwardProblem
// pointing at the shared tables).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tbe/case_builder.h"
#include "tbe/host_case.h"
#include "tbe/precision.h"
#include "tbe/problem.h"

namespace tbe::fuzz {

/// The tables of a fuzz case (shared by the shrinker's candidates: copied only when a step changes
/// them). Table t is rows[t] x dims[t] elements of dtype at element offset offsets[t].
struct Tables {
  DType dtype = DType::F32;
  std::vector<std::int64_t> rows;
  std::vector<std::int32_t> dims;
  std::vector<std::int64_t> offsets;  // element offset of each table
  std::vector<std::byte> weights;
  /// Sets offsets (prefix sums of E·D) and allocates zeroed weights.
  void allocate() {
    offsets.assign(rows.size(), 0);
    std::int64_t total = 0;
    for (std::size_t t = 0; t < rows.size(); ++t) {
      offsets[t] = total;
      total += rows[t] * dims[t];
    }
    weights.assign(static_cast<std::size_t>(total) * dtype_size(dtype), std::byte{0});
  }
  /// Stores round_to(dtype, v) at element (t, r, d).
  void set(std::size_t t, std::int64_t r, std::int64_t d, double v) {
    store_from_double(dtype, weights.data(), offsets[t] + r * dims[t] + d, v);
  }
  std::byte* row_ptr(std::size_t t, std::int64_t r) {
    return weights.data() + (offsets[t] + r * dims[t]) * dtype_size(dtype);
  }
  const std::byte* row_ptr(std::size_t t, std::int64_t r) const {
    return weights.data() + (offsets[t] + r * dims[t]) * dtype_size(dtype);
  }
};

/// One bag: its lookups (row ids of its feature's table, possibly out of range on purpose).
struct Bag {
  std::vector<std::int64_t> idx;
  std::vector<float> w;  // same length as idx (used when the case is weighted)
};

/// Invalid arguments (validate must reject them; both backends must agree on the argument).
enum class Invalid : std::uint8_t {
  None, OffsetsShort, OffsetsLong, DimTooBig, DimZero, RowsZero, FeatureMap, PolicyWeights,
  NoneWeighted, NoneMixedD, VbeTotals, NegativeBatch
};
/// "none", "offsets-short", "dim-2049", ... (as tbe-fuzz prints them).
const char* to_string(Invalid i);

/// A fuzz case: the representation the generator and the shrinker work on (tables, bags as lists
/// of lookups, the offset faults and the invalid argument to apply on top; bad index values live
/// in the bags themselves). build() turns it into a forward call.
struct FuzzCase {
  std::shared_ptr<const Tables> tables;
  std::vector<std::int32_t> ftm;  // feature_table_map
  DType index_dtype = DType::I64;
  PoolingMode pooling = PoolingMode::Sum;
  BoundsCheckMode bounds = BoundsCheckMode::Warning;
  PrecisionPolicy policy;
  bool weighted = false;
  bool fused = true;  // ForwardStrategy::fused_bounds_check
  std::int64_t B = 0;
  std::int32_t R = 0;  // VBE ranks (0: not VBE)
  std::vector<std::int32_t> vbe;  // [T·R]
  std::vector<std::int64_t> lead;  // indices before offsets[0] (in no bag)
  std::vector<Bag> bags;           // feature-major; VBE: rank-major inside a feature
  std::vector<OffsetFault> faults;
  Invalid invalid = Invalid::None;
  std::string fill = "uniform";
  bool huge = false;
  /// Drawn in the small-table shape (docs/small-table.md): T <= 2 features on their own FP16
  /// tables with E <= 64 and 64 <= D <= 128, unweighted SUM or MEAN, not VBE, 16..63 bags of
  /// 64..160 lookups (15% empty); the lookups cap may empty later bags, so a feature's mean L
  /// can fall below the path's 64 and a row's SL below its minimum run (those stay generic).
  bool small_table = false;

  std::int64_t T() const { return static_cast<std::int64_t>(ftm.size()); }
  /// Bags of feature f: B, or Σ_r vbe[f·R + r] under VBE.
  std::int64_t bags_of_feature(std::int64_t f) const {
    if (R == 0) return B;
    std::int64_t n = 0;
    for (std::int32_t r = 0; r < R; ++r) n += vbe[f * R + r];
    return n;
  }
  /// Index in `bags` of feature f's first bag.
  std::int64_t first_bag(std::int64_t f) const {
    std::int64_t n = 0;
    for (std::int64_t g = 0; g < f; ++g) n += bags_of_feature(g);
    return n;
  }
  /// N: every index, the leading ones included.
  std::int64_t lookups() const {
    std::int64_t n = static_cast<std::int64_t>(lead.size());
    for (const Bag& b : bags) n += static_cast<std::int64_t>(b.idx.size());
    return n;
  }
};

/// A built forward call. `c` has no weights of its own: the problem points at the shared tables.
struct Built {
  ForwardCase c;
  ForwardProblem p;
};

/// Expands `fc` into `out` through tbe::build_lookups (tbe/case_builder.h): lookups feature-major
/// (the leading indices first, weight 1), offsets from the bags, then the offset faults, then the
/// invalid argument; the tables stay fc.tables (not copied). Throws InvalidArgument when an int32
/// case does not fit (never for generated cases).
void build(const FuzzCase& fc, Built& out);

/// One line: T, tables, N, bags, B or VBE R, dtypes, policy, pooling, bounds mode, faults, fill,
/// D and E of every table.
std::string describe(const FuzzCase& fc);

}  // namespace tbe::fuzz
