// Internal: the indices and offsets a reference kernel computes from, after the bounds-check mode
// (forward.cpp, backward.cpp; not a public header).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "tbe/bounds_check.h"
#include "tbe/problem.h"

namespace tbe::detail {

/// `lookups` is p.lookups itself (valid input) or p.lookups with indices / offsets replaced by
/// the repaired int64 copies this object owns (so it moves but does not copy).
struct LookupSource {
  LookupBatchView lookups;
  std::vector<std::int64_t> repaired_offsets, repaired_indices;
  std::int64_t warnings = 0;  ///< bounds-check warnings of the repair (0 for valid input)

  explicit LookupSource(const LookupBatchView& original) : lookups(original) {}
  LookupSource(const LookupSource&) = delete;
  LookupSource& operator=(const LookupSource&) = delete;
  LookupSource(LookupSource&&) = default;
  LookupSource& operator=(LookupSource&&) = default;
};

/// Applies p.options.bounds_check. FATAL throws BoundsCheckError before anything is computed.
/// WARNING / IGNORE repair only when something is invalid (the repair of a valid input is the
/// identity, so skipping it is exact and saves copying N indices). NONE uses the input as is.
inline LookupSource prepare_lookups(const ForwardProblem& p) {
  LookupSource src(p.lookups);
  switch (p.options.bounds_check) {
    case BoundsCheckMode::None: return src;
    case BoundsCheckMode::Fatal:
      if (auto v = find_first_violation(p)) throw BoundsCheckError(*v);
      return src;
    case BoundsCheckMode::Warning:
    case BoundsCheckMode::Ignore:
      if (!find_first_violation(p)) return src;
      break;
  }
  RepairResult r = repair(p);
  src.repaired_offsets = std::move(r.offsets);
  src.repaired_indices = std::move(r.indices);
  src.lookups.index_dtype = DType::I64;
  src.lookups.indices = src.repaired_indices.data();
  src.lookups.offsets = src.repaired_offsets.data();
  src.warnings = r.warnings;
  return src;
}

}  // namespace tbe::detail
