// tbe-verify's reports: the header, the per-axis tables, kernel paths, failures with replay
// commands, the final count line, the JSON document and the progress indicator.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tbe/judge/matrix.h"
#include "tbe/judge/runner.h"
#include "tbe/workloads.h"

namespace tbe::judge {

/// Everything about a run that is not a case result.
struct RunInfo {
  WorkloadSpec spec;                  ///< the workload (spec.B = the batch size run)
  std::int64_t sequence_samples = 0;  ///< samples per feature of pooling=none cases
  std::int32_t vbe_ranks = 0;         ///< R of the VBE variant
  std::uint64_t seed = 1;
  Design design = Design::Pairwise;
  std::size_t design_cases = 0;  ///< cases in the design (before --only)
  Coverage coverage;             ///< pair coverage of the cases run
  std::string only;              ///< --only text, "" if none
  bool only_from_full = false;   ///< --only matched nothing in the design: full product used
  bool device_present = false;   ///< device rows ran
  std::string device;            ///< device name, or "no GPU"
  std::string skip_reason;       ///< why device rows are skipped
  std::string backend;           ///< name() of the backend under test, if any
  bool device_is_cpu = false;    ///< --backend cpu (tests the tool, not a GPU)
  int threads = 1;               ///< OpenMP threads
  double seconds_total = 0.0;       ///< the whole run (every section), wall time
  double seconds_forward = 0.0;     ///< the forward matrix (its cases, generation included)
  double seconds_generation = 0.0;  ///< generating the base workloads (part of the forward)
};

struct Totals {
  std::int64_t passed = 0, failed = 0, skipped = 0;
  /// The same counts split by target: device rows (the backend under test) and CPU self-checks.
  std::int64_t device_passed = 0, device_failed = 0, device_skipped = 0;
  std::int64_t cpu_passed = 0, cpu_failed = 0;
};
/// Counts rows: each case's device row and (with no GPU) its CPU self-check row; a case that is not
/// applicable counts once, as skipped.
Totals count_rows(const std::vector<CaseResult>& results);

/// "--batch 8192 --seed 1 [--design full]" part shared by replay commands.
std::string replay_command(const RunInfo& info, const CaseAxes& c);

void print_header(std::ostream& os, const RunInfo& info);
/// --list: the cases of the design (after --only), one per line, with what each is.
void print_list(std::ostream& os, const RunInfo& info, const std::vector<CaseAxes>& cases);
/// Per-axis tables, kernel paths, failures with replay commands and the final count line.
void print_results(std::ostream& os, const RunInfo& info, const std::vector<CaseResult>& results);

nlohmann::json to_json(const RunInfo& info, const std::vector<CaseResult>& results);

/// Progress on stderr: updated in place on a TTY, one line per finished case otherwise.
class Progress {
 public:
  Progress(std::ostream& os, std::size_t total, bool tty);
  void begin(std::size_t index, const CaseAxes& c);
  void end(std::size_t index, const CaseResult& r);
  void finish();

 private:
  std::ostream& os_;
  std::size_t total_;
  bool tty_;
  std::size_t last_width_ = 0;
};

/// "policy=seed-default w=fp16 out=fp32 ..." (the label with spaces, for humans).
std::string spaced_label(const CaseAxes& c);

}  // namespace tbe::judge
