// tbe-mutate's judgement of one child run and its kill table (docs/mutation.md): what a run of
// the main job (tbe-verify) or of the GPU tests (test_optimized) said, read from its captured
// output, and the table / JSON of all faults. Plain C++ over the outputs: the CPU tests feed it
// captured samples.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tbe::mutate {

/// How a child process ended.
struct ChildResult {
  int exit_code = 0;       ///< exit status (valid when !signaled)
  int signal = 0;          ///< the signal that ended it (0: it exited)
  bool over_budget = false;  ///< stopped by tbe-mutate at its time budget
  bool stopped_at_kill = false;  ///< stopped by tbe-mutate after the first failure was seen
  double seconds = 0.0;    ///< wall time of the child
  double kill_seconds = 0.0;  ///< when the first failure was seen (valid with a failure)
  std::string output;      ///< stdout and stderr, interleaved as written
  /// over_budget: the bytes of `output` read before the budget's stop (what follows is the
  /// child's reaction to SIGTERM, e.g. Catch2's "FAILED: ... fatal error condition: SIGTERM")
  std::size_t output_before_stop = 0;
};

/// The first failure a child run reports: which check (or test), the row, the case folder and the
/// replay command (empty when the output has none).
struct Failure {
  std::string check;
  std::string row;
  std::string case_dir;
  std::string replay;
};

/// The first failure in tbe-verify's output: its first fail line (tbe/judge/fail_line.h); else, for
/// a run that failed without one, the first "FAILED: path ..." line (a kernel path no row
/// exercised) or "tbe-verify: error: ..." line (a device error, a crash it caught). nullopt: none.
std::optional<Failure> first_verify_failure(std::string_view output);

/// The first failing test case in the output of a Catch2 (v2) console reporter: the name printed
/// in the block header above the first "FAILED:" line. nullopt: none.
std::optional<Failure> first_catch_failure(std::string_view output);

/// One child's verdict on the fault it ran with.
enum class Outcome {
  Killed,    ///< a check failed (or the child crashed / exited non-zero)
  Survived,  ///< the child passed (exit 0)
  Budget,    ///< stopped at its time budget before any failure (counts as survived)
  NoDevice,  ///< no GPU row ran (tbe-verify exit 4, test_optimized exit 77)
  NotRun,    ///< not started: the total budget was spent (or not asked for)
};
std::string to_string(Outcome o);  ///< "killed", "survived", "budget", "no-device", "not-run"

/// What one child run of `kind` ("verify" or "tests") says about its fault.
struct Verdict {
  Outcome outcome = Outcome::NotRun;
  std::optional<Failure> failure;  ///< with Killed: what failed ("exit N" / "signal N" if unknown)
  double seconds = 0.0;            ///< time to kill (Killed) or run time
};
/// Judges a finished tbe-verify child. A fail line or a non-zero exit other than 4 kills.
Verdict judge_verify(const ChildResult& r);
/// Judges a finished test_optimized child (exit 77: no device).
Verdict judge_tests(const ChildResult& r);

/// One row of the kill table.
struct KillRow {
  std::string fault;  ///< catalogue name, "(baseline)" for the run without a fault
  std::string where;  ///< the fault's file: function
  Verdict verify;     ///< the main job
  Verdict tests;      ///< the GPU tests (NotRun unless asked for)
  std::string log;    ///< the file holding the children's output ("" if not kept)
};

/// A fault is killed when the main job or (if they ran) the tests killed it.
bool killed(const KillRow& r);

/// The table: fault | main job (verdict, check, time) | tests | case folder / replay; then the
/// count line "killed K of F faults (main job alone: M); survivors: ...".
void print_kill_table(std::ostream& os, const KillRow& baseline, const std::vector<KillRow>& rows,
                      bool with_tests);
nlohmann::json kill_table_json(const KillRow& baseline, const std::vector<KillRow>& rows);

}  // namespace tbe::mutate
