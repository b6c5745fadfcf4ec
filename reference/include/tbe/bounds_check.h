// Bounds check and repair as its own step (docs/semantics.md "Bounds check").
// Repair rule = FBGEMM's sequential CPU rule, made the definition; equal to the max-scan form
//   o'[0] = clamp(o[0], 0, N),  o'[k+1] = min(max(o[k+1], o'[k]), N)   (after o[T·B] := N),
// so a GPU can repair in parallel and match it exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tbe/problem.h"

namespace tbe {

/// Result of check/repair. offsets/indices are int64 copies (same lengths as the inputs).
struct RepairResult {
  std::vector<std::int64_t> offsets;  ///< [num_offsets] repaired
  std::vector<std::int64_t> indices;  ///< [N] repaired (bad index -> 0; its weight is kept)
  std::int64_t warnings = 0;          ///< repaired bags + repaired last offset + repaired indices
  std::int64_t bad_bags = 0;
  std::int64_t bad_last_offset = 0;   ///< 0 or 1
  std::int64_t bad_indices = 0;
};

/// First offender in offender order (see BoundsViolation), or nullopt if the input is valid.
/// Checks the *original* offsets/indices (FATAL semantics). `p` must pass validate().
std::optional<BoundsViolation> find_first_violation(const ForwardProblem& p);

/// Applies `p.options.bounds_check`:
///  - Fatal: throws BoundsCheckError(find_first_violation) if any; else returns the input unchanged
///    with zero counts;
///  - Warning / Ignore: the sequential repair rule, counted (both count; Ignore just does not log);
///  - None: returns the input unchanged, counts 0 (the caller promised valid input).
/// Index checks use the repaired bags: index p of bag (f, ·) is bad if p < 0 or p >= E_t(f).
/// Indices that belong to no bag (before offsets[0]) are neither checked nor repaired.
/// Throws InvalidArgument if validate(p) fails.
RepairResult repair(const ForwardProblem& p);

/// The sequential rule, written as the loop in docs/semantics.md (kept separate so tests can pin that it
/// equals the max-scan form used by repair() and by the GPU).
std::vector<std::int64_t> repair_offsets_sequential(std::vector<std::int64_t> offsets,
                                                    std::int64_t num_indices,
                                                    std::int64_t* bad_bags,
                                                    std::int64_t* bad_last_offset);
/// The max-scan form (see header comment). Same outputs as repair_offsets_sequential.
std::vector<std::int64_t> repair_offsets_max_scan(const std::vector<std::int64_t>& offsets,
                                                  std::int64_t num_indices,
                                                  std::int64_t* bad_bags,
                                                  std::int64_t* bad_last_offset);

}  // namespace tbe
