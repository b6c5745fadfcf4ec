// Checks, rows and verdicts: what every judged call of the suite reduces to. A row holds the checks
// of one target (the backend under test, or the CPU self-checks) in the order they ran; its
// verdict is Failed when any check failed (the first failed check gives the reason), else Passed.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "tbe/oracle/forward_oracle.h"

namespace tbe::judge {

enum class Verdict : std::uint8_t { Passed, Failed, Skipped };
std::string to_string(Verdict v);  // "passed", "failed", "skipped"

/// What a row judges. Device: the backend under test (CUDA) against the oracle and the reference.
/// SelfCheck: the reference and the oracle against each other on the CPU (run when no GPU).
enum class Target : std::uint8_t { Device, SelfCheck };
std::string to_string(Target t);  // "gpu", "cpu-self-check"

/// One check inside a row: an oracle judgement of an output or an agreement/invariant.
struct Check {
  std::string name;  ///< e.g. "oracle", "warnings", "repair", "fatal.malformed", "canary"
  bool passed = true;
  std::string detail;  ///< the oracle summary, or what was expected and what came back
  std::optional<oracle::CheckReport> report;  ///< set when an output was judged
};

/// A check without an oracle report: `ok` with `detail` saying what was compared.
Check agreement(const std::string& name, bool ok, const std::string& detail);

struct RowResult {
  Target target = Target::Device;
  Verdict verdict = Verdict::Skipped;
  std::string reason;  ///< skip reason, or the first failed check's detail
  std::vector<Check> checks;
  std::int64_t warnings_expected = 0;  ///< reference repair's warning count
  std::int64_t warnings_got = 0;       ///< the judged side's count
  std::vector<std::string> paths;      ///< ForwardStats::paths of every call, deduplicated
  double seconds = 0.0;
  /// The judged output check with the largest |position| (nullptr if no output was judged).
  const Check* worst_check() const;
};

/// Sets row.verdict from its checks: Failed with reason "<name>: <detail>" of the first failed
/// check, else Passed.
void finish_row(RowResult& row);

/// Appends `paths` to row.paths, skipping those already there (order of first appearance).
void add_paths(RowResult& row, const std::vector<std::string>& paths);

/// Runs `fn`, turning an exception it throws into a failed check `name` ("unexpected error: ...")
/// appended to `checks`.
template <class Fn>
void guarded(std::vector<Check>& checks, const std::string& name, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    checks.push_back(agreement(name, false, std::string("unexpected error: ") + e.what()));
  }
}

}  // namespace tbe::judge
