// Running one case of the tbe-verify matrix: derive the case's problem from a base workload
// (generated once per weight storage type), run the backend under test, judge it with the oracle
// and compare warnings and errors; or, with no GPU, run the reference self-checks instead.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tbe/backend.h"
#include "tbe/host_case.h"
#include "tbe/judge/matrix.h"
#include "tbe/judge/row.h"
#include "tbe/judge/section_times.h"
#include "tbe/workloads.h"

namespace tbe::judge {

/// The input a case runs on (valid, or the malformed copy of bounds warning/ignore/fatal).
struct CaseInput {
  std::int64_t bags = 0;
  std::int64_t lookups = 0;
  std::int64_t samples_per_feature = 0;  ///< B (non-VBE) or the slice taken before VBE
  std::int32_t vbe_ranks = 0;
  std::string malformed;  ///< what was injected, "" if nothing
  /// ForwardStrategy of the device row: fused bounds check or a separate pass (from a hash of
  /// the label, so both are exercised across the matrix and a replay runs the same one).
  bool fused_bounds_check = true;
};

struct CaseResult {
  CaseAxes axes;
  std::string label;
  bool applicable = true;
  CaseInput input;
  std::vector<RowResult> rows;
  double seconds = 0.0;
  Verdict verdict() const;  ///< Failed if any row failed, Passed if any passed, else Skipped
  /// Case folder the failing case was written to ("" if none; docs/case-files.md), and why a
  /// failing case was not written.
  std::string saved_case;
  std::string save_note;
};

/// Which faults a malformed copy carries (all deterministic in the seed).
struct FaultSet {
  bool bad_indices = true;        ///< a few indices >= E (INT32_MAX among them) and negative
  bool decreasing_pair = true;    ///< one bag with offsets[k] > offsets[k+1]
  bool short_last_offset = true;  ///< offsets[last] < N
  /// offsets[0] < 0 (bag 0's start repaired to 0 and counted): the repairing modes only (a FATAL
  /// case keeps its single first offender of the kind fault_set_for chose)
  bool bad_first_offset = false;
};

struct RunnerConfig {
  std::string workload = "seed-large";  ///< named workload (workloads.h)
  std::int64_t batch = 8192;            ///< B the named workload is scaled to
  /// Use this spec instead of the named workload (tests: tiny tables). Its B is used as is.
  std::optional<WorkloadSpec> custom_spec;
  std::uint64_t seed = 1;
  /// Backend under test; nullptr: device rows are skipped (with `skip_reason`) and the CPU
  /// self-checks run instead.
  Backend* device = nullptr;
  std::string skip_reason;
  /// Failing cases are written to `save_failures_dir`/<case label> (inputs, and the backend's
  /// outputs as the case's `recorded` block); "" writes nothing. At most save_failures_max.
  std::string save_failures_dir;
  std::int64_t save_failures_max = 4;
};

/// Runs cases against one base workload per weight storage type. Not thread-safe; the work
/// inside (generation, reference, oracle) is OpenMP-parallel.
class Runner {
 public:
  explicit Runner(RunnerConfig cfg);
  ~Runner();

  /// The workload spec the bases are generated from (weights set per case group).
  const WorkloadSpec& spec() const { return spec_; }
  /// Samples per feature used by pooling=none cases: ceil(B / L), so the [N, D] sequence output
  /// is as large as the pooled [B, T·D] output.
  std::int64_t sequence_samples() const;
  /// R of the VBE variant (2..4, from the seed) and the per-(feature, rank) batch sizes drawn for
  /// `samples` samples per feature.
  std::int32_t vbe_ranks() const;

  /// Runs one case (generating the base for its weight type first if needed).
  CaseResult run(const CaseAxes& c);

  /// Seconds spent generating base workloads so far.
  double generation_seconds() const { return generation_seconds_; }
  /// Seconds of the cases run so far by section: generation, lookups (variants and injected
  /// faults), reference, backend (the calls of the backend under test, transfers included),
  /// enclosures, judge, emulations (CPU self-checks).
  const SectionTimes& section_times() const { return times_; }

 private:
  struct Impl;
  RunnerConfig cfg_;
  WorkloadSpec spec_;
  double generation_seconds_ = 0.0;
  std::int64_t saved_failures_ = 0;
  SectionTimes times_;
  std::unique_ptr<Impl> impl_;
};

/// The fault set used for the malformed copy of a case: bounds warning/ignore get every fault;
/// fatal cycles (by a hash of the label, so replays match) through all faults, indices only and
/// the last offset only, so each kind of first offender is reached across the matrix.
FaultSet fault_set_for(const CaseAxes& c);

/// FNV-1a of a string (stable across platforms): used to derive per-case choices from labels.
std::uint64_t stable_hash(const std::string& s);

}  // namespace tbe::judge
