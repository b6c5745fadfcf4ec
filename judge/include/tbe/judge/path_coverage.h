// The "path coverage" row of tbe-verify: every kernel path of the forward, backward and IKBO
// families that the CUDA backends can reach through tbe::Backend / ikbo::IkboBackend must have
// been reported (ForwardStats::paths, BackwardStats::paths, IkboBackend::last_paths) by some
// device row of a full run; a path no row exercised fails the run, named (docs/architecture.md
// "How to add a kernel path").
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tbe/judge/row.h"

namespace tbe::judge {

enum class PathFamily : std::uint8_t { Forward, Backward, Ikbo };
std::string to_string(PathFamily f);  ///< "forward", "backward", "ikbo"

/// The paths a full GPU run must exercise in family `f`. Forward: pooled vec4 / vec8 / scalar
/// loads, column chunks, group per bag, 32-bit row index, VBE, sequence vec4 / vec8 / scalar, bounds fused /
/// separate / FATAL check. Backward: sort key32, short, long chunked / fused, SR, psw gradient,
/// warp / block groups, non-deterministic, and the small-table rows' histogram paths (forward
/// mma, backward, backward with the forward's saved counts). IKBO: the default LCE stage
/// (padded-k) with its user and candidate GEMMs and gather-add. Not listed (not reachable through
/// the Backend interfaces; the GPU tests force them): forward.pooled.pipelined, forward.pooled.row_index64, bwd.sort.key64,
/// bwd.hoisted, the other LCE stages; forward.pooled.narrow_vec4 (the matrix's tables are 16-byte
/// aligned and its D odd or multiples of 8; the GPU tests and the fuzz campaign reach it).
const std::vector<std::string>& required_paths(PathFamily f);

/// The paths one family's device rows reported, and whether its requirement applies.
struct FamilyPaths {
  PathFamily family = PathFamily::Forward;
  /// True when the family's whole design ran on the backend under test (false: no GPU, --backend
  /// cpu, --only, a single replayed row, the section not selected).
  bool checked = false;
  std::string why_not;  ///< when !checked, e.g. "no GPU", "--only filters the matrix"
  std::set<std::string> exercised;
};

/// The row: one check "paths.<family>" per checked family, failing with "missing: a, b" when a
/// required path is absent; Skipped (reason: each family's why_not) when no family is checked.
RowResult path_coverage_row(const std::vector<FamilyPaths>& families);

/// The required paths of `fp.family` missing from fp.exercised (empty when !fp.checked).
std::vector<std::string> missing_paths(const FamilyPaths& fp);

/// "path coverage: passed (forward: 12/12 required paths exercised; ...)", or "FAILED path
/// coverage" with one line per failed family naming the paths never exercised, or skipped with
/// the reason.
void print_path_coverage(std::ostream& os, const RowResult& row);
/// {"verdict": ..., "reason": ..., "checks": [{"name", "passed", "detail"}...]}
nlohmann::json path_coverage_json(const RowResult& row);

}  // namespace tbe::judge
